"""`--expect-fail FILE`: the known departures of a target, one case id per line.

    # our agent still answers a timed-out command with -15
    LE-shell-timeout-exit-code
    LE-envelope-unknown-payload-field   # dropped by our strict models

A listed case that fails does not fail the run; a listed case that passes is
reported (the file can lose it). Blank lines and `#` comments are ignored. An
id that names no case is refused: a typo must not hide a failure.
"""

from __future__ import annotations

from pathlib import Path


class ExpectationsError(ValueError):
    """The file cannot be read, or names cases that do not exist."""


def read_expectations(path: Path, known: set[str]) -> set[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExpectationsError(f"cannot read --expect-fail {path}: {exc}") from None
    ids: set[str] = set()
    unknown: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if len(entry.split()) != 1:
            raise ExpectationsError(f"{path}:{number}: one case id per line, got {entry!r}")
        if entry not in known:
            unknown.append(f"{entry} (line {number})")
        ids.add(entry)
    if unknown:
        raise ExpectationsError(f"{path}: no such case: {', '.join(unknown)}")
    return ids
