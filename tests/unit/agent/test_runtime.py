"""The agent runtime over a scripted in-memory hub: reconnect schedule, fatal stops, audit.

Everything runs on the simulator's virtual-time loop, so a 60 s backoff costs
no real time and the schedule is exact.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tetherbed.agent.audit.key import load_or_create
from tetherbed.agent.audit.verify import verify
from tetherbed.agent.backoff import Backoff
from tetherbed.agent.config import AgentConfig
from tetherbed.agent.exit_codes import AgentExit
from tetherbed.agent.runtime import AgentRuntime
from tetherbed.runtime.transport import TransportClosed, UpgradeRefused
from tetherbed.simulator.virtual_time import VirtualClock, run_virtual


class FakeConnection:
    """One side of an in-memory connection; the test plays the hub on the other."""

    def __init__(self) -> None:
        self.to_agent: asyncio.Queue[bytes | TransportClosed] = asyncio.Queue()
        self.from_agent: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed_with: tuple[int, str] | None = None

    async def send(self, data: bytes) -> None:
        if self.closed_with is not None:
            raise TransportClosed(*self.closed_with)
        self.from_agent.put_nowait(data)

    async def recv(self) -> bytes:
        item = await self.to_agent.get()
        if isinstance(item, TransportClosed):
            self.closed_with = (item.code or 1006, item.reason)
            raise item
        return item

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed_with is None:
            self.closed_with = (code, reason)
            self.to_agent.put_nowait(TransportClosed(code, reason))

    # --- the hub's side ---
    async def next_frame(self) -> dict[str, Any]:
        return msgspec.json.decode(await asyncio.wait_for(self.from_agent.get(), 60))

    def send_frame(self, **frame: Any) -> None:
        self.to_agent.put_nowait(msgspec.json.encode(frame))

    def drop(self, code: int | None = None, reason: str = "") -> None:
        self.to_agent.put_nowait(TransportClosed(code, reason))


Script = Callable[[FakeConnection], Any]


class Harness:
    """Plays a hub: each connection attempt takes the next scripted behaviour."""

    def __init__(self, tmp_path: Path, scripts: list[str | Script]) -> None:
        self.clock = VirtualClock(asyncio.get_running_loop())  # type: ignore[arg-type]
        self.scripts = list(scripts)
        self.attempts: list[float] = []
        self.tasks: list[asyncio.Task[Any]] = []
        root = tmp_path / "root"
        root.mkdir()
        self.state = tmp_path / "state"
        config = AgentConfig(
            hub_url="ws://hub",
            token="t",
            root=str(root),
            session_id="s1",
            machine_id="m1",
            state_dir=str(self.state),
        )
        self.runtime = AgentRuntime(
            config,
            connector=self.connect,
            clock=self.clock,
            rng=random.Random(7),
            healthy_after=10.0,
        )

    async def connect(self, url: str, headers: Any) -> FakeConnection:
        self.attempts.append(self.clock.monotonic())
        behaviour = self.scripts.pop(0) if self.scripts else "refuse"
        if behaviour == "refuse":
            raise ConnectionRefusedError("nobody listening")
        if behaviour == "unauthorized":
            raise UpgradeRefused(401, b'{"error":{"code":"AUTH_FAILED"}}')
        conn = FakeConnection()
        assert callable(behaviour)
        self.tasks.append(asyncio.ensure_future(behaviour(conn)))
        return conn

    async def run(self) -> Any:
        try:
            return await asyncio.wait_for(self.runtime.run(), 100_000)
        finally:
            await self.runtime.close()


async def handshake(conn: FakeConnection) -> dict[str, Any]:
    hello = await conn.next_frame()
    assert hello["type"] == "HELLO"
    conn.send_frame(
        type="HELLO_ACK",
        id=hello["id"],
        version="1.1",
        payload={
            "session_id": "s1",
            "protocol_version": "1.1",
            "granted_capabilities": hello["payload"]["capabilities"],
        },
    )
    return hello


def stays(seconds: float, then_code: int | None = None) -> Script:
    """Serve, let virtual time pass, then drop (None) or close with a code."""

    async def script(conn: FakeConnection) -> None:
        await handshake(conn)
        await asyncio.sleep(seconds)
        conn.drop(then_code)

    return script


@pytest.fixture
def harness_factory(tmp_path: Path):
    def make(scripts: list[str | Script]) -> Harness:
        return Harness(tmp_path, scripts)

    return make


def gaps(harness: Harness) -> list[float]:
    return [b - a for a, b in zip(harness.attempts, harness.attempts[1:], strict=False)]


def test_refused_connections_back_off_exponentially_with_jitter(harness_factory) -> None:
    run_virtual(_test_refused_connections_back_off_exponentially_with_jitter(harness_factory))


async def _test_refused_connections_back_off_exponentially_with_jitter(harness_factory) -> None:
    harness = harness_factory(["refuse"] * 9 + ["unauthorized"])
    stop = await harness.run()
    assert stop.exit_code is AgentExit.AUTH_REFUSED
    bounds = Backoff()
    assert len(harness.runtime.delays) == 9
    for attempt, delay in enumerate(harness.runtime.delays):
        low, high = bounds.bounds(attempt)
        assert low <= delay <= high
    # the cap: attempt 6 and later wait 60 s plus jitter
    assert all(60.0 <= d <= 65.0 for d in list(harness.runtime.delays)[6:])
    assert gaps(harness) == pytest.approx(list(harness.runtime.delays))


def test_a_healthy_connection_resets_the_schedule(harness_factory) -> None:
    run_virtual(_test_a_healthy_connection_resets_the_schedule(harness_factory))


async def _test_a_healthy_connection_resets_the_schedule(harness_factory) -> None:
    harness = harness_factory(["refuse", "refuse", "refuse", stays(30.0), "refuse", "unauthorized"])
    await harness.run()
    delays = harness.runtime.delays
    assert 4.0 <= delays[2] <= 9.0  # the third failure in a row waits 2^2 s plus jitter
    assert 1.0 <= delays[3] <= 6.0  # reset: not 2^3 s, the base again


def test_a_short_lived_connection_does_not_reset(harness_factory) -> None:
    run_virtual(_test_a_short_lived_connection_does_not_reset(harness_factory))


async def _test_a_short_lived_connection_does_not_reset(harness_factory) -> None:
    harness = harness_factory(["refuse", "refuse", stays(1.0), "unauthorized"])
    await harness.run()
    assert 4.0 <= harness.runtime.delays[2] <= 9.0  # third delay: 2^2 s base, no reset


def test_unexpected_clean_close_still_waits_the_base_backoff(harness_factory) -> None:
    run_virtual(_test_unexpected_clean_close_still_waits_the_base_backoff(harness_factory))


async def _test_unexpected_clean_close_still_waits_the_base_backoff(harness_factory) -> None:
    harness = harness_factory([stays(30.0, then_code=1000), "unauthorized"])
    await harness.run()
    (delay,) = harness.runtime.delays
    assert 1.0 <= delay <= 6.0
    assert gaps(harness)[0] >= 30.0 + 1.0


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        (4426, AgentExit.PROTOCOL_VERSION_MISMATCH),
        (4427, AgentExit.SESSION_TAKEN_OVER),
        (4428, AgentExit.SESSION_REVOKED),
        (4429, AgentExit.PLATFORM_SHUTDOWN),
    ],
)
def test_fatal_close_codes_stop_for_good(harness_factory, code: int, exit_code) -> None:
    run_virtual(_test_fatal_close_codes_stop_for_good(harness_factory, code, exit_code))


async def _test_fatal_close_codes_stop_for_good(harness_factory, code: int, exit_code) -> None:
    harness = harness_factory([stays(0.0, then_code=code), stays(1.0)])
    stop = await harness.run()
    assert stop.exit_code is exit_code
    assert str(code) in stop.reason
    assert len(harness.attempts) == 1  # never reconnected
    assert not harness.runtime.delays


def test_session_revoked_closes_4428_sends_nothing_more_and_is_audited(
    harness_factory,
) -> None:
    run_virtual(
        _test_session_revoked_closes_4428_sends_nothing_more_and_is_audited(harness_factory)
    )


async def _test_session_revoked_closes_4428_sends_nothing_more_and_is_audited(
    harness_factory,
) -> None:
    seen: list[dict[str, Any]] = []

    async def script(conn: FakeConnection) -> None:
        await handshake(conn)
        seen.append(await conn.next_frame())  # the STATUS after the handshake
        conn.send_frame(
            type="SESSION_REVOKED",
            id="r",
            payload={"reason": "another_shim_connected", "new_shim_machine_id": "m1"},
        )
        conn.send_frame(type="PING", id="after", payload={})
        await asyncio.sleep(0.05)
        while not conn.from_agent.empty():
            seen.append(msgspec.json.decode(conn.from_agent.get_nowait()))

    harness = harness_factory([script, stays(1.0)])
    stop = await harness.run()
    await asyncio.gather(*harness.tasks)
    assert stop.exit_code is AgentExit.SESSION_REVOKED
    assert [f["type"] for f in seen] == ["STATUS"]  # no PONG after the revocation
    assert harness.runtime._transport is None
    assert len(harness.attempts) == 1
    log_file = harness.state / "audit" / "s1.jsonl"
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    revoked = [r for r in records if r["op"] == "SESSION_REVOKED"]
    assert revoked and revoked[0]["details"]["reason"] == "another_shim_connected"
    assert verify(log_file, load_or_create(harness.state)).ok


def test_status_reports_audit_bytes(harness_factory) -> None:
    run_virtual(_test_status_reports_audit_bytes(harness_factory))


async def _test_status_reports_audit_bytes(harness_factory) -> None:
    statuses: list[dict[str, Any]] = []

    async def script(conn: FakeConnection) -> None:
        await handshake(conn)
        statuses.append(await conn.next_frame())
        conn.send_frame(type="FILE_STAT", id="q", version="1.1", payload={"path": "."})
        answer = await conn.next_frame()
        assert answer["type"] == "FILE_STAT_RESPONSE"
        await asyncio.sleep(1.0)
        statuses.append(await conn.next_frame())  # the periodic STATUS, 30 s later
        conn.drop(4429)

    harness = harness_factory([script])
    await harness.run()
    assert statuses[0]["type"] == statuses[1]["type"] == "STATUS"
    assert statuses[1]["payload"]["audit_log_bytes"] > statuses[0]["payload"]["audit_log_bytes"]
