"""CPU and memory of the processes of a run (the generator, the hub, agents), from /proc.

Sampled while the run goes on, because Locust's forked workers are gone by
the time it ends: each process's last seen user+system time is kept, and a
process tree (a Locust master and its workers) is followed by parent pid.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            raw = stat.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def _children(roots: set[int]) -> set[int]:
    """`roots` and every live descendant of them."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                parents[int(entry)] = found[0]
    tree = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def resident_bytes(pid: int) -> int | None:
    """Resident memory of a process and its descendants (a hub command may be a
    wrapper around the hub), or None when it is gone."""
    total, found = 0, False
    for member in _children({pid}):
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
                found = True
    return total if found else None


@dataclass
class CpuSampler:
    """CPU seconds of named groups of process trees, sampled every `every` s."""

    groups: dict[str, set[int]] = field(default_factory=dict)
    every: float = 0.5
    _seen: dict[str, dict[int, float]] = field(default_factory=dict)
    _first: dict[str, dict[int, float]] = field(default_factory=dict)
    _last_sample: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def watch(self, group: str, pid: int | None) -> None:
        if pid is not None:
            self.groups.setdefault(group, set()).add(pid)

    def sample(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_sample < self.every:
            return
        self._last_sample = now
        for group, roots in self.groups.items():
            seen = self._seen.setdefault(group, {})
            first = self._first.setdefault(group, {})
            for pid in _children(roots):
                found = _stat(pid)
                if found is not None:
                    first.setdefault(pid, found[1])
                    seen[pid] = found[1]

    def seconds(self, group: str) -> float:
        """CPU seconds the group used since it was first seen."""
        seen, first = self._seen.get(group, {}), self._first.get(group, {})
        return sum(seen[pid] - first.get(pid, 0.0) for pid in seen)

    def processes(self, group: str) -> int:
        return len(self._seen.get(group, {}))
