"""The agent's path jail on the real file system, with generated paths.

Every file operation (read, write, mkdir through create_parents, stat, list,
delete, move) and a command's working directory run through the agent's own
dispatcher on a fresh root next to a sentinel tree
(simulator/fuzz/paths/arena.py): nothing outside the root may be read,
written, listed, moved, deleted or used as a working directory, and every
refusal carries a spec code. A second property swaps a directory of the root
for a link to the sentinel while operations run. The planted
`jail_off_by_one` agent defect must be found, and its shrunk example is
printed (`pytest -s`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import settings
from hypothesis.errors import FlakyFailure

from tests.conftest import FUZZ_FIGURES
from tetherbed.simulator.fuzz.paths.jail_judge import swap_working_directories
from tetherbed.simulator.fuzz.paths.properties import (
    SWAP_REPEATS,
    JailBreach,
    escape_property,
    judged,
    swap_property,
)
from tetherbed.simulator.fuzz.profiles import scaled

RecordProperty = Callable[[str, object], None]


def test_no_operation_leaves_the_root(record_property: RecordProperty) -> None:
    examples = scaled(150)
    started = time.monotonic()
    with judged() as judge:
        escape_property(judge, settings(settings.default, max_examples=examples))()
    figures = f"path jail: {examples} sequences in {time.monotonic() - started:.1f} s"
    print(figures)
    record_property(FUZZ_FIGURES, figures)


def test_no_operation_follows_a_swapped_link(record_property: RecordProperty) -> None:
    examples = scaled(20)
    started = time.monotonic()
    with judged() as judge:
        swap_property(judge, settings(settings.default, max_examples=examples))()
    figures = (
        f"symlink swaps: {examples} operations x {SWAP_REPEATS} runs in "
        f"{time.monotonic() - started:.1f} s"
    )
    print(figures)
    record_property(FUZZ_FIGURES, figures)


def test_the_path_properties_find_a_jail_off_by_one_component(
    record_property: RecordProperty,
) -> None:
    search = settings(settings.default, max_examples=300, derandomize=True, database=None)
    with judged(frozenset({"jail_off_by_one"})) as judge, pytest.raises(JailBreach) as caught:
        escape_property(judge, search)()
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    print(f"\njail_off_by_one -> {caught.value}\n{notes}")
    assert "outside the root" in str(caught.value) or "sentinel" in str(caught.value)
    shrunk = str(caught.value).split(": ", 1)[0]
    record_property(FUZZ_FIGURES, f"planted agent jail_off_by_one: found, shrunk to {shrunk}")


def test_the_swap_property_finds_a_jail_that_follows_links() -> None:
    """`jail_skips_symlinks` (a conformance-suite defect) judges paths as
    written: reads and writes through `swap` reach the sentinel whenever it is
    a link at that instant. A race need not repeat when Hypothesis replays
    it, so the breach may come wrapped in a FlakyFailure: it is there either way."""
    search = settings(settings.default, max_examples=100, derandomize=True, database=None)
    with judged(frozenset({"jail_skips_symlinks"})) as judge:
        try:
            swap_property(judge, search)()
        except (JailBreach, FlakyFailure) as failure:
            breaches = _breaches(failure)
        else:
            breaches = []
    print(f"\njail_skips_symlinks -> {breaches[:1]}")
    assert breaches, "the swap property let a link-following jail pass"


def test_the_swap_property_finds_a_working_directory_named_by_path() -> None:
    """`cwd_by_path`: the shell's old race — the cwd checked, then named by its
    path, so a swap before the child's chdir runs the command outside."""
    search = settings(settings.default, max_examples=60, derandomize=True, database=None)
    with judged(frozenset({"cwd_by_path"})) as judge:
        try:
            swap_property(judge, search, swap_working_directories())()
        except (JailBreach, FlakyFailure) as failure:
            breaches = _breaches(failure)
        else:
            breaches = []
    print(f"\ncwd_by_path -> {breaches[:1]}")
    assert breaches, "the swap property let a racy working directory pass"
    assert "outside the root" in str(breaches[0])


def _breaches(failure: BaseException) -> list[JailBreach]:
    if isinstance(failure, JailBreach):
        return [failure]
    if isinstance(failure, BaseExceptionGroup):
        return [b for inner in failure.exceptions for b in _breaches(inner)]
    return []
