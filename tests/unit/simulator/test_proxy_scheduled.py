"""The frame scheduler inside real proxies, between real `websockets` peers.

In process (one scheduler for two proxies, as the process backend runs it)
and as `tetherbed proxy --schedule ... --decisions ...` (the process the
docker backend runs beside each agent).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import signal
import sys
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tetherbed.simulator.proxy.registry import ProxyRegistry
from tetherbed.simulator.proxy.scheduler import DecisionLog, ScheduleOptions

LAUNCH = "from tetherbed.simulator.proxy.cli import main; raise SystemExit(main())"


async def _echo(ws: ServerConnection) -> None:
    async for message in ws:
        await ws.send(f"echo:{json.loads(message)['id']}")


def _msg(ident: str) -> str:
    return json.dumps({"type": "FILE_READ", "id": ident, "payload": {}})


async def _talk(url: str, name: str, count: int) -> list[str]:
    async with connect(url, ping_interval=None, proxy=None) as ws:
        for i in range(count):
            await ws.send(_msg(f"{name}{i}"))
        return [str(await asyncio.wait_for(ws.recv(), 10)) for _ in range(count)]


async def _scheduled_run(options: ScheduleOptions, seed: int) -> list[str]:
    async with serve(_echo, "127.0.0.1", 0) as server:
        upstream = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        scheduler = options.build(seed)
        registry = ProxyRegistry(random.Random(seed), scheduler=scheduler)
        a = await registry.create("agent-a", "127.0.0.1:0", upstream)
        b = await registry.create("agent-b", "127.0.0.1:0", upstream)
        try:
            answers = await asyncio.gather(
                _talk(f"ws://{a.listen}/ws", "a", 4), _talk(f"ws://{b.listen}/ws", "b", 4)
            )
        finally:
            await registry.close()
            scheduler.close()
        return [*answers[0], *answers[1]]


async def test_one_scheduler_orders_two_proxies_keeping_each_lane_fifo(tmp_path: Path):
    decisions = tmp_path / "d.jsonl"
    answers = await _scheduled_run(ScheduleOptions.explore("80ms", decisions=decisions), 4)
    assert answers == [f"echo:a{i}" for i in range(4)] + [f"echo:b{i}" for i in range(4)]
    log = DecisionLog.read(decisions)
    assert log.header["schedule"] == "explore" and log.header["seed"] == 4
    # four requests, four answers and the two Close frames on each connection
    assert len(log.decisions) == 20 and log.summary == {"released": 20}
    lanes: dict[tuple, list[int]] = {}
    for decision in log.decisions:
        lanes.setdefault(decision.key.lane, []).append(decision.key.index)
    assert set(lanes) == {
        (link, 0, direction) for link in ("agent-a", "agent-b") for direction in ("up", "down")
    }
    assert all(indexes == sorted(indexes) for indexes in lanes.values())
    assert {d.key.link for d in log.decisions[:8]} == {"agent-a", "agent-b"}  # interleaved


async def test_a_replay_follows_the_recorded_order_across_proxies(tmp_path: Path):
    recorded = tmp_path / "recorded.jsonl"
    await _scheduled_run(ScheduleOptions.explore("80ms", decisions=recorded), 9)
    again = tmp_path / "again.jsonl"
    await _scheduled_run(ScheduleOptions.replaying(recorded, decisions=again, wait=2.0), 1)
    wanted = [d.key for d in DecisionLog.read(recorded).decisions]
    replayed = DecisionLog.read(again)
    assert [d.key for d in replayed.decisions] == wanted
    divergence = (replayed.summary or {})["divergence"]
    assert divergence["followed"] == 20 and divergence["missing"] == divergence["unexpected"] == 0


async def test_the_proxy_command_schedules_and_writes_its_decisions(tmp_path: Path):
    decisions = tmp_path / "link.jsonl"
    async with serve(_echo, "127.0.0.1", 0) as server:
        upstream = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LAUNCH, "--api", "127.0.0.1:0",
            "--proxy", f"link=127.0.0.1:0={upstream}", "--schedule", "50ms,4",
            "--schedule-seed", "3", "--schedule-as", "link=agent-w", "--decisions", str(decisions),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            await asyncio.wait_for(process.stdout.readline(), 20)
            line = (await asyncio.wait_for(process.stdout.readline(), 5)).decode()
            listen = re.search(r"listening on (\S+) ->", line)
            assert listen, line
            answers = await _talk(f"ws://{listen.group(1)}/ws", "x", 3)
            assert answers == ["echo:x0", "echo:x1", "echo:x2"]
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 20) == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    log = DecisionLog.read(decisions)
    assert log.header["seed"] == 3 and log.header["bound"] == "50ms,4"
    assert {d.key.link for d in log.decisions} == {"agent-w"}
    assert [d.kind for d in log.decisions if d.key.direction == "up"][:3] == ["FILE_READ"] * 3
    assert log.summary is not None and log.summary["released"] == len(log.decisions)


async def test_a_half_close_waits_for_every_frame_released_with_it():
    """The hub sends a revocation and a Close frame and hangs up at once while
    the scheduler holds both: the agent still gets both before the FIN."""

    async def revoke_and_hang_up(ws: ServerConnection) -> None:
        await ws.send(_msg("revoked"))
        await ws.send(_msg("last"))
        ws.transport.close()  # FIN right behind them, no closing handshake

    for seed in range(6):
        async with serve(revoke_and_hang_up, "127.0.0.1", 0) as server:
            upstream = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
            scheduler = ScheduleOptions.explore("60ms").build(seed)
            registry = ProxyRegistry(random.Random(seed), scheduler=scheduler)
            proxy = await registry.create("agent-a", "127.0.0.1:0", upstream)
            try:
                async with connect(f"ws://{proxy.listen}/ws", ping_interval=None, proxy=None) as ws:
                    got = []
                    with contextlib.suppress(ConnectionClosed):
                        async for message in ws:
                            got.append(json.loads(message)["id"])
                assert got == ["revoked", "last"], f"seed {seed}"
            finally:
                await registry.close()
                scheduler.close()
