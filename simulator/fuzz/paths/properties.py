"""The jail properties as runnable Hypothesis tests, for any agent defect set.

`escape_property` runs short sequences of generated operations on a fresh
root; `swap_property` runs each generated operation many times while a thread
swaps a directory of the root for a link to the sentinel. Both fail with the
breaches the judge saw; Hypothesis shrinks the failing sequence first.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given
from hypothesis import settings as Settings
from hypothesis import strategies as st

from tetherbed.simulator.fuzz.paths.arena import Arena
from tetherbed.simulator.fuzz.paths.jail_judge import (
    JailJudge,
    Operation,
    operations,
    swap_operations,
)
from tetherbed.simulator.fuzz.paths.symlink_swapper import SymlinkSwapper

#: How many times one operation runs against the swapping directory.
SWAP_REPEATS = 25


class JailBreach(AssertionError):
    """An operation reached outside the root, or was refused without a spec code."""


@contextmanager
def judged(defects: frozenset[str] = frozenset()) -> Iterator[JailJudge]:
    """A judge on a fresh arena in a temporary directory, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="tetherbed-jail-"))
    judge = JailJudge(Arena(base), defects=defects)
    try:
        yield judge
    finally:
        judge.close()
        shutil.rmtree(base, ignore_errors=True)


def _check(judge: JailJudge, operation: Operation) -> None:
    problems = judge.run(operation)
    if problems:
        raise JailBreach(f"{operation!r}: " + "; ".join(problems))


def escape_property(judge: JailJudge, settings: Settings) -> Callable[[], None]:
    @settings
    @given(steps=st.lists(operations(), min_size=1, max_size=3))
    def no_operation_leaves_the_root(steps: list[Operation]) -> None:
        judge.fresh()
        for operation in steps:
            _check(judge, operation)

    return no_operation_leaves_the_root


def swap_property(
    judge: JailJudge,
    settings: Settings,
    strategy: st.SearchStrategy[Operation] | None = None,
) -> Callable[[], None]:
    """`strategy` defaults to every operation on paths through `swap`."""

    @settings
    @given(operation=strategy if strategy is not None else swap_operations())
    def no_operation_follows_a_swapped_link(operation: Operation) -> None:
        judge.fresh()
        with SymlinkSwapper(judge.arena):
            for _ in range(SWAP_REPEATS):
                _check(judge, operation)

    return no_operation_follows_a_swapped_link
