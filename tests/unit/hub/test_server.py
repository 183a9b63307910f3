"""The aiohttp hub on a real loopback socket: limits, admission, slow peers.

Each test is a finding of the interop issue, reproduced against the hub as it
runs in production (same HubServer, same aiohttp settings), in this test's
event loop so that it takes a fraction of a second.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import msgspec
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tetherbed.client.sandbox import HubSandbox
from tetherbed.wire.limits import FRAME_LIMIT_BYTES

from .server_harness import FakeAgent, RunningHub, StalledClient, request, running_hub


async def client(hub: RunningHub, session: str, token: str):  # type: ignore[no-untyped-def]
    return await connect(
        f"{hub.url}/v1/sessions/{session}/client",
        additional_headers={"Authorization": f"Bearer {token}"},
        compression=None,
        max_size=2 * FRAME_LIMIT_BYTES,
        ping_interval=None,
        proxy=None,
    )


async def test_a_frame_of_exactly_16_mib_crosses_the_hub_both_ways() -> None:
    """Before: aiohttp refuses a message of exactly max_msg_size bytes, so the
    hub closed 1009 on a frame the spec allows (16 MiB)."""
    async with running_hub() as hub:
        agent_token, client_token = hub.token("alice", "agent"), hub.token("alice", "client")
        sizes: list[int] = []

        def answer(frame: dict) -> tuple[str, dict] | None:
            sizes.append(len(msgspec.json.encode(frame)))
            if frame["type"] == "FILE_WRITE":
                return "ACK", {"ok": True}
            # exactly 16 MiB on the wire, once the agent's envelope is around it
            shell = agent.frame_size("FILE_CONTENTS", frame["id"], _contents(""))
            return "FILE_CONTENTS", _contents("x" * (FRAME_LIMIT_BYTES - shell))

        agent = await FakeAgent.connect(hub, "s1", agent_token, answer=answer)
        conn = await client(hub, "s1", client_token)
        try:
            long_id = "q" * 64  # the hub's own id is shorter: the relayed frame shrinks
            shell = request("FILE_WRITE", long_id, {"path": "/w/a", "content": ""})
            pad = FRAME_LIMIT_BYTES - len(shell)
            frame = request("FILE_WRITE", long_id, {"path": "/w/a", "content": "x" * pad})
            assert len(frame) == FRAME_LIMIT_BYTES
            await conn.send(frame.decode())
            ack = msgspec.json.decode(await asyncio.wait_for(conn.recv(), 20))
            assert ack["type"] == "ACK", ack
            assert ack["id"] == long_id
            assert sizes[0] <= FRAME_LIMIT_BYTES
            # and the other way: the agent's answer of exactly 16 MiB
            await conn.send(request("FILE_READ", "r", {"path": "/w/a"}).decode())
            contents = await asyncio.wait_for(conn.recv(), 20)
            assert msgspec.json.decode(contents)["type"] == "FILE_CONTENTS"
            assert agent.sent_sizes[-1] == FRAME_LIMIT_BYTES
            assert agent.conn.close_code is None
        finally:
            await conn.close()
            await agent.close()


def _contents(content: str) -> dict:
    return {"content": content, "encoding": "utf-8", "size_bytes": 0, "truncated": False}


async def test_deeply_nested_json_is_answered_and_the_connection_lives() -> None:
    """Before: RecursionError killed the connection's handler; no ERROR came."""
    async with running_hub() as hub:
        agent = await FakeAgent.connect(hub, "s1", hub.token("alice", "agent"))
        conn = await client(hub, "s1", hub.token("alice", "client"))
        try:
            deep = b"[" * 1000 + b"]" * 1000
            await conn.send(b'{"type":"FILE_STAT","id":"deep","payload":' + deep + b"}")
            error = msgspec.json.decode(await asyncio.wait_for(conn.recv(), 5))
            assert error["id"] == "deep" and error["payload"]["code"] == "INVALID_MESSAGE"
            await conn.send(request("FILE_STAT", "next", {"path": "/w/a"}).decode())
            after = msgspec.json.decode(await asyncio.wait_for(conn.recv(), 5))
            assert after["type"] == "FILE_STAT_RESPONSE"
        finally:
            await conn.close()
            await agent.close()


async def test_half_open_upgrades_are_closed_after_the_handshake_timeout() -> None:
    """Before: no handshake timeout; 1,000 half-open upgrades were all still
    open after 25 s (aiohttp's keep-alive default is an hour)."""
    async with running_hub(handshake_timeout=0.5) as hub:
        conns = []
        for _ in range(50):
            reader, writer = await asyncio.open_connection(hub.host, hub.port)
            writer.write(b"GET /ws/local-executor HTTP/1.1\r\nHost: x\r\n")
            conns.append((reader, writer))
        started = time.monotonic()
        closed = await asyncio.wait_for(asyncio.gather(*(reader.read() for reader, _ in conns)), 10)
        assert closed == [b""] * 50
        assert time.monotonic() - started < 5
        for _, writer in conns:
            writer.close()


async def test_the_agent_endpoint_gives_one_answer_for_any_session_id() -> None:
    """Before: 403 for a session of another user, 101 for a new id: an agent
    token could probe which session ids exist."""
    async with running_hub() as hub:
        hub.store.create_session("alice", "alices-session")
        mallory = hub.token("mallory", "agent")
        theirs = await FakeAgent.connect(hub, "alices-session", mallory, machine="evil")
        fresh = await FakeAgent.connect(hub, "brand-new", mallory, machine="evil")
        try:
            assert theirs.ack["type"] == fresh.ack["type"] == "HELLO_ACK"
            assert set(theirs.ack["payload"]) == set(fresh.ack["payload"])
            # ... and mallory's agent serves nobody of alice's
            async with HubSandbox.connect(
                hub.url, "alices-session", hub.token("alice", "client"), request_timeout=5
            ) as sb:
                with pytest.raises(Exception) as refused:
                    await sb.files.exists("/w/a")
                assert getattr(refused.value, "code", None) == "AGENT_NOT_CONNECTED"
            assert not [f for f in theirs.received if f["type"] == "FILE_STAT"]
        finally:
            await theirs.close()
            await fresh.close()


async def test_a_revoked_session_refuses_agents_and_clients_at_admission() -> None:
    """Before: the revoke flag was written and never read: a new agent
    connected to the revoked session and served a client's command."""
    async with running_hub() as hub:
        agent_token, client_token = hub.token("alice", "agent"), hub.token("alice", "client")
        agent = await FakeAgent.connect(hub, "s1", agent_token)
        async with aiohttp.ClientSession() as http:
            revoke = await http.post(
                f"http://{hub.host}:{hub.port}/v1/sessions/s1/revoke",
                headers={"Authorization": f"Bearer {client_token}"},
            )
            assert revoke.status == 200
        await agent.close()
        with pytest.raises(InvalidStatus) as refused_agent:
            await FakeAgent.connect(hub, "s1", agent_token, machine="m2")
        assert refused_agent.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as refused_client:
            await client(hub, "s1", client_token)
        assert refused_client.value.response.status_code == 403
        assert b"SESSION_REVOKED" in (refused_client.value.response.body or b"")


async def test_a_client_that_stops_reading_stalls_nobody_else() -> None:
    """Before: the hub sent to the stalled client inside the agent's read loop,
    so every other client of the session waited (25 s and more), and the agent
    itself missed its PONG and was dropped."""
    async with running_hub(slow_consumer_seconds=2.0) as hub:
        agent_token, client_token = hub.token("alice", "agent"), hub.token("alice", "client")
        agent = await FakeAgent.connect(hub, "s1", agent_token)
        stalled = await StalledClient.open(hub, "/v1/sessions/s1/client", client_token)
        try:
            for i in range(2):  # two 10 MiB answers the stalled client never reads
                stalled.send_text(request("FILE_READ", f"big{i}", {"path": f"/big/{10 << 20}"}))
            await asyncio.sleep(0.5)
            async with HubSandbox.connect(hub.url, "s1", client_token) as sb:
                worst = 0.0
                for _ in range(20):
                    started = time.monotonic()
                    assert await asyncio.wait_for(sb.files.exists("/w/a"), 10) is False
                    worst = max(worst, time.monotonic() - started)
                    await asyncio.sleep(0.1)
            assert worst < 1.0
            # the stalled client is cut off as a slow consumer; the agent stays
            assert await _slow_consumers(hub, at_least=1, within=10) >= 1
            assert agent.conn.close_code is None
            with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
                while True:  # drain what the kernel kept, then see the end
                    chunk = await asyncio.wait_for(stalled.reader.read(1 << 20), 10)
                    if not chunk:
                        raise ConnectionError("closed")
        finally:
            stalled.close()
            await agent.close()


async def _slow_consumers(hub: RunningHub, *, at_least: int, within: float) -> int:
    """The hub's slow-consumer count from /metrics, once it reaches `at_least`."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as http:
        while True:
            metrics = await (await http.get(f"http://{hub.host}:{hub.port}/metrics")).text()
            line = next(x for x in metrics.splitlines() if x.startswith("tetherbed_hub_slow_"))
            count = int(float(line.rsplit(" ", 1)[1]))  # Prometheus text: "1.0"
            if count >= at_least or time.monotonic() > deadline:
                return count
            await asyncio.sleep(0.1)


async def test_sessions_list_the_allowed_root_their_agent_serves() -> None:
    async with running_hub() as hub:
        agent = await FakeAgent.connect(hub, "s1", hub.token("alice", "agent"))
        try:
            async with aiohttp.ClientSession() as http:
                listing = await http.get(
                    f"http://{hub.host}:{hub.port}/v1/sessions",
                    headers={"Authorization": f"Bearer {hub.token('alice', 'client')}"},
                )
                (session,) = (await listing.json())["sessions"]
            assert session["allowed_root"] == "/srv/root"
        finally:
            await agent.close()


async def test_the_stalled_client_helper_really_stalls() -> None:
    """Guard for the HOL test: frames the stalled client sends do arrive."""
    async with running_hub() as hub:
        agent = await FakeAgent.connect(hub, "s1", hub.token("alice", "agent"))
        stalled = await StalledClient.open(
            hub, "/v1/sessions/s1/client", hub.token("alice", "client")
        )
        try:
            stalled.send_text(request("FILE_STAT", "one", {"path": "/w/a"}))
            for _ in range(50):
                if agent.received:
                    break
                await asyncio.sleep(0.05)
            assert [f["type"] for f in agent.received] == ["FILE_STAT"]
        finally:
            stalled.close()
            await agent.close()
