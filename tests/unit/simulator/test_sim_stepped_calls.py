"""SteppedCalls: blocking calls stepped one system call at a time in virtual time."""

from __future__ import annotations

import asyncio
import os
import random
import threading
from pathlib import Path

import pytest

from tetherbed.simulator.sim.stepped_calls import Abandoned, SteppedCalls
from tetherbed.simulator.virtual_time import VirtualTimeLoop


def stat_three_times(path: str, log: list[str], name: str) -> int:
    for i in range(3):
        os.stat(path)
        log.append(f"{name}{i}")
    return 3


def interleaving(seed: int, path: str) -> list[str]:
    log: list[str] = []
    calls = SteppedCalls(random.Random(seed))
    loop = VirtualTimeLoop()
    try:

        async def both() -> list[int]:
            return list(
                await asyncio.gather(
                    calls.run(stat_three_times, path, log, "a"),
                    calls.run(stat_three_times, path, log, "b"),
                )
            )

        assert loop.run_until_complete(both()) == [3, 3]
    finally:
        loop.close()
    return log


def test_two_calls_interleave_by_the_seed_and_the_same_seed_repeats(tmp_path: Path) -> None:
    runs = {seed: interleaving(seed, str(tmp_path)) for seed in range(12)}
    orders = {tuple(log) for log in runs.values()}
    assert len(orders) > 1  # seeds give different interleavings
    assert any(log[:3] != ["a0", "a1", "a2"] for log in runs.values())  # they overlap
    assert interleaving(5, str(tmp_path)) == runs[5]


def test_errors_come_back_as_they_were_raised(tmp_path: Path) -> None:
    loop = VirtualTimeLoop()
    try:
        calls = SteppedCalls(random.Random(1))
        with pytest.raises(FileNotFoundError):
            loop.run_until_complete(calls.run(os.stat, str(tmp_path / "missing")))
    finally:
        loop.close()


def test_a_cancelled_call_stops_before_its_next_system_call(tmp_path: Path) -> None:
    done: list[str] = []
    raised: list[BaseException] = []

    def two_writes() -> None:
        try:
            (tmp_path / "one").write_text("1")
            done.append("one")
            (tmp_path / "two").write_text("2")
            done.append("two")
        except BaseException as exc:
            raised.append(exc)
            raise

    loop = VirtualTimeLoop()
    try:
        calls = SteppedCalls(random.Random(1))

        async def cancel_soon() -> None:
            task = asyncio.ensure_future(calls.run(two_writes))
            while not done:
                await asyncio.sleep(1e-6)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        threads = threading.active_count()
        loop.run_until_complete(cancel_soon())
    finally:
        loop.close()
    assert done == ["one"] and not (tmp_path / "two").exists()
    assert [type(e) for e in raised] == [Abandoned]
    assert threading.active_count() <= threads  # the worker is gone
