"""The virtual-time loop: long sleeps cost nothing, threads freeze time, order is exact."""

from __future__ import annotations

import asyncio
import time

from tetherbed.simulator.virtual_time import EPOCH, VirtualClock, VirtualTimeLoop, run_virtual


def test_an_hour_of_sleeping_takes_no_real_time() -> None:
    async def main() -> float:
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    started = time.perf_counter()
    assert run_virtual(main()) == 3600
    assert time.perf_counter() - started < 1.0


def test_timers_fire_in_virtual_order() -> None:
    order: list[tuple[str, float]] = []

    async def sleeper(name: str, delay: float) -> None:
        await asyncio.sleep(delay)
        order.append((name, asyncio.get_running_loop().time()))

    async def main() -> None:
        await asyncio.gather(sleeper("c", 30), sleeper("a", 1), sleeper("b", 7.5))

    run_virtual(main())
    assert order == [("a", 1), ("b", 7.5), ("c", 30)]


def test_thread_work_freezes_virtual_time() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        timer = asyncio.ensure_future(asyncio.sleep(5))
        before = loop.time()
        await asyncio.to_thread(time.sleep, 0.2)  # real work: no timer may overtake it
        after = loop.time()
        await timer
        return after - before, loop.time()

    elapsed_during_thread, end = run_virtual(main())
    assert elapsed_during_thread == 0
    assert end == 5


def test_clock_follows_the_loop() -> None:
    loop = VirtualTimeLoop()
    clock = VirtualClock(loop)
    try:
        loop.run_until_complete(asyncio.sleep(12))
        assert clock.monotonic() == 12
        assert clock.time() == EPOCH + 12
    finally:
        loop.close()
