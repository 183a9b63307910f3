"""How far the scheduler may hold frames: a time bound and a count bound.

`--schedule 200ms` holds each frame up to 200 ms; `--schedule 200ms,8` also
never holds more than 8 frames at once (the earliest due goes out at once
when a ninth arrives). A bare number is milliseconds; `s` is accepted too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_HOLD_MS = 100
DEFAULT_MAX_HELD = 16
_TIME = re.compile(r"^(\d+(?:\.\d+)?)(ms|s)?$")


class BoundError(ValueError):
    """A schedule bound that cannot be read."""


@dataclass(frozen=True, slots=True)
class ScheduleBound:
    hold_ms: int = DEFAULT_HOLD_MS
    max_held: int = DEFAULT_MAX_HELD

    @classmethod
    def parse(cls, text: str | None) -> ScheduleBound:
        """`TIME[,COUNT]`: `200ms`, `0.2s`, `200` (ms), `200ms,8`; None: the defaults."""
        if text is None or not text.strip():
            return cls()
        time_text, _, count_text = text.strip().partition(",")
        match = _TIME.match(time_text.strip())
        if match is None:
            raise BoundError(
                f"schedule bound {text!r}: want TIME[,COUNT], e.g. 200ms or 200ms,8 "
                "(TIME in ms, or with an s)"
            )
        value = float(match.group(1)) * (1000 if match.group(2) == "s" else 1)
        hold_ms = round(value)
        max_held = DEFAULT_MAX_HELD
        if count_text:
            if not count_text.strip().isdigit() or int(count_text) < 1:
                raise BoundError(f"schedule bound {text!r}: COUNT must be a whole number ≥ 1")
            max_held = int(count_text)
        return cls(hold_ms, max_held)

    def __str__(self) -> str:
        return f"{self.hold_ms}ms,{self.max_held}"
