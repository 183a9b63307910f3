"""Defensive accessors for history records.

Checkers must judge whatever a backend wrote, including histories from
third-party hubs, truncated runs and hand-written tests, so every field is
read through these helpers: a missing or ill-typed field becomes None (or is
skipped) instead of an exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tetherbed.simulator.history import History, Record

COMPLETIONS = frozenset({"ok", "fail", "info"})
#: A position in the history: (time, index). Ties in time keep history order.
Key = tuple[float, int]
END: Key = (math.inf, math.inf)  # type: ignore[assignment]


def fields(record: Record) -> dict[str, Any]:
    """The record's value when it is a dict, else an empty dict."""
    return record.value if isinstance(record.value, dict) else {}


def number(value: Any) -> float | None:
    """A finite float, or None for anything else (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def time_of(record: Record) -> float:
    found = number(record.time)
    return 0.0 if found is None else found


def key(record: Record) -> Key:
    index = record.index if isinstance(record.index, int) else 0
    return (time_of(record), index)


def ordered(history: History | Iterable[Record]) -> list[Record]:
    """Records by time, history order breaking ties (a merged history's order)."""
    return sorted((r for r in history if isinstance(r, Record)), key=key)


def is_event(record: Record, *names: str) -> bool:
    return record.type == "event" and (not names or record.f in names)


def is_agent(process: Any) -> bool:
    return isinstance(process, str) and process.startswith("agent:")


def is_client(process: Any) -> bool:
    return isinstance(process, str) and process.startswith("client:")


def record_dict(record: Record) -> dict[str, Any]:
    """The record as stored in history.jsonl, without failing on odd fields."""
    try:
        return record.to_dict()
    except (TypeError, ValueError):
        return {
            "index": record.index,
            "time": record.time,
            "process": record.process,
            "type": record.type,
            "f": record.f,
            "value": record.value,
            "session": record.session,
            "machine": record.machine,
            "req": record.req,
        }


def seconds(value: float) -> str:
    """A time for a summary line: 12.500 s."""
    return f"{value:.3f} s"


def short(value: Any, limit: int = 40) -> str:
    """A value quoted in a summary, cut to `limit` characters."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
