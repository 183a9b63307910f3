"""A run's interleaving: the order of what crossed the wire, times ignored.

The neutral recorder (the sim network, or the fault proxy on process and
docker) writes one `wire:<node>` event per connect, upgrade, frame, close and
end. The interleaving is the sequence of those events, each reduced to what
says *what* happened — the link and its connection, the event, a frame's
direction, type and id, a close's direction and code — and never *when*:
two runs that did the same things in the same order have the same
interleaving, whatever their latencies and backoff delays were.

Ids drawn from a generator (a HELLO's UUID) differ from seed to seed without
meaning anything, so every id is renamed by its first appearance (`@1`,
`@2`, ...): a request and its answer keep sharing a name, and two seeds that
differ only in the random ids they drew have one interleaving.

    python -m tetherbed.simulator.explore.interleaving HISTORY.jsonl        # print it
    python -m tetherbed.simulator.explore.interleaving A.jsonl B.jsonl      # diff two
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap.records import CLOSE, FRAME, node_of

#: The fields of a wire event that say what happened (in this order).
_WHAT = ("dir", "type", "code", "status", "how", "method")
#: Fields holding an id, renamed by first appearance.
_IDS = ("id",)


def steps(history: History | Iterable[Record]) -> list[str]:
    """The interleaving: one line per wire event, in the order they were recorded."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for record in history:
        node = node_of(record.process)
        if node is None or record.type != "event":
            continue
        value: dict[str, Any] = record.value if isinstance(record.value, dict) else {}
        conn = str(value.get("conn", node))
        parts = [conn, record.f]
        for key in _WHAT:
            if key in value and value[key] is not None:
                if key == "code" and record.f not in (CLOSE, FRAME):
                    continue
                parts.append(f"{key}={value[key]}")
        for key in _IDS:
            found = value.get(key)
            if found is not None:
                text = str(found)
                if text not in names:
                    names[text] = f"@{len(names) + 1}"
                parts.append(f"{key}={names[text]}")
        lines.append(" ".join(parts))
    return lines


def fingerprint(history: History) -> str:
    """A short digest of the run's interleaving: equal iff the interleavings are."""
    text = "\n".join(steps(history)).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def render(lines: Sequence[str]) -> str:
    """The interleaving as numbered lines, for a person."""
    return "".join(f"{n:4} {line}\n" for n, line in enumerate(lines, 1))


def diff(a: Sequence[str], b: Sequence[str], *, names: tuple[str, str] = ("a", "b")) -> str:
    """Where two interleavings part: a unified diff of their lines."""
    return "".join(
        line if line.endswith("\n") else line + "\n"
        for line in difflib.unified_diff(list(a), list(b), names[0], names[1], lineterm="")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tetherbed.simulator.explore.interleaving",
        description="Print a run's interleaving, or diff the interleavings of two runs.",
    )
    parser.add_argument("histories", nargs="+", type=Path, help="one or two history.jsonl files")
    args = parser.parse_args(argv)
    if len(args.histories) > 2:
        parser.error("give one history to print, or two to diff")
    try:
        loaded = [History.read(path) for path in args.histories]
    except (OSError, ValueError, KeyError) as exc:
        print(f"interleaving: {exc}", file=sys.stderr)
        return 2
    if len(loaded) == 1:
        print(f"# interleaving {fingerprint(loaded[0])}")
        sys.stdout.write(render(steps(loaded[0])))
        return 0
    first, second = (steps(h) for h in loaded)
    if first == second:
        print(f"same interleaving {fingerprint(loaded[0])}")
        return 0
    names = (
        f"{args.histories[0]} ({fingerprint(loaded[0])})",
        f"{args.histories[1]} ({fingerprint(loaded[1])})",
    )
    sys.stdout.write(diff(first, second, names=names))
    return 1


if __name__ == "__main__":
    sys.exit(main())
