"""The hub and the client SDK against a strict peer, on real processes.

The peer (`strict_peer.py`) drops, without answering, every request the spec's
strict schema refuses and every frame of another major version, answers
SHIM_OVERLOADED for max_concurrent and for its command rate, and resolves
relative paths against its own working directory — as the public reference
shim does. Each test is a finding of the interop issue; it failed before.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from tetherbed.client.sandbox import HubError, HubSandbox, OverloadedError
from tetherbed.launch import HubProcess, ManagedProcess, start_hub
from tetherbed.runtime.websocket_transport import connect_websocket

pytestmark = pytest.mark.e2e

PEER_SCRIPT = Path(__file__).with_name("strict_peer.py")


def start_strict_peer(
    hub: HubProcess, token: str, root: Path, session: str, *, cwd: Path, args: list[str]
) -> ManagedProcess:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(PEER_SCRIPT),
            *("--hub", hub.url, "--token", token, "--session-id", session),
            *("--root", str(root), "--machine-id", f"strict-{session}", *args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd=cwd,
    )
    managed = ManagedProcess("strict-peer", proc)
    threading.Thread(target=_keep_tail, args=(proc, managed.log_tail), daemon=True).start()
    return managed


def _keep_tail(proc: subprocess.Popen[bytes], tail: deque[str]) -> None:
    assert proc.stderr is not None
    for raw in iter(proc.stderr.readline, b""):
        tail.append(raw.decode("utf-8", "replace").rstrip())


@dataclass
class Stack:
    hub: HubProcess
    peer: ManagedProcess
    client_token: str
    root: Path
    session: str


@pytest.fixture
def strict_stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    """A hub (options from `@pytest.mark.hub_args`) and one strict peer
    (`@pytest.mark.peer_args`), the peer started in a folder outside its root."""
    hub_args = request.node.get_closest_marker("hub_args")
    peer_args = request.node.get_closest_marker("peer_args")
    hub = start_hub(tmp_path / "hub", args=list(hub_args.args) if hub_args else [])
    peer = None
    try:
        root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
        root.mkdir()
        elsewhere.mkdir()
        client_token = hub.token("alice", "client")
        peer = start_strict_peer(
            hub,
            hub.token("alice", "agent"),
            root,
            "strict",
            cwd=elsewhere,
            args=list(peer_args.args) if peer_args else [],
        )
        hub.wait_connected(client_token, "strict")
        yield Stack(hub, peer, client_token, root, "strict")
    finally:
        if peer is not None:
            peer.stop()
        hub.stop()


async def raw_client(stack: Stack):  # type: ignore[no-untyped-def]
    url = f"{stack.hub.url}/v1/sessions/{stack.session}/client"
    return await connect_websocket(url, {"Authorization": f"Bearer {stack.client_token}"})


def frame(kind: str, request_id: str, payload: dict, version: str = "1.1") -> bytes:
    return msgspec.json.encode(
        {"type": kind, "id": request_id, "ts": time.time(), "version": version, "payload": payload}
    )


@pytest.mark.hub_args("--request-timeout", "3")
async def test_four_requests_of_another_major_do_not_kill_the_session(strict_stack: Stack) -> None:
    """Before: the hub forwarded the client's "2.0"; the peer dropped all four,
    which then held every slot, and the fifth request was never answered."""
    transport = await raw_client(strict_stack)
    try:
        path = str(strict_stack.root / "missing")
        for i in range(4):
            await transport.send(frame("FILE_STAT", f"v2-{i}", {"path": path}, version="2.0"))
        await transport.send(frame("FILE_STAT", "fifth", {"path": path}))
        answers = {}
        async with asyncio.timeout(10):
            while len(answers) < 5:
                answer = msgspec.json.decode(await transport.recv())
                answers[answer["id"]] = answer["type"]
    finally:
        await transport.close()
    assert set(answers.values()) == {"FILE_STAT_RESPONSE"}


@pytest.mark.hub_args("--request-timeout", "2")
async def test_requests_a_strict_peer_drops_time_out_and_free_their_slots(
    strict_stack: Stack,
) -> None:
    """Before: four dropped requests (= max_concurrent) held their slots until
    the agent reconnected; every later request of every client waited."""
    transport = await raw_client(strict_stack)
    try:
        for i in range(4):  # an unknown field: the strict peer never answers
            await transport.send(frame("FILE_STAT", f"drop{i}", {"path": "/x", "zzz": 1}))
        started = time.monotonic()
        answers = [
            msgspec.json.decode(await asyncio.wait_for(transport.recv(), 10)) for _ in range(4)
        ]
        assert time.monotonic() - started < 6
    finally:
        await transport.close()
    assert {a["payload"]["code"] for a in answers} == {"AGENT_TIMEOUT"}
    async with HubSandbox.connect(strict_stack.hub.url, "strict", strict_stack.client_token) as sb:
        assert await asyncio.wait_for(sb.files.exists(str(strict_stack.root / "x")), 5) is False


async def test_the_readme_tour_works_against_a_strict_peer(strict_stack: Stack) -> None:
    """Before: files.write put `format` into FILE_WRITE and commands.run sent
    `"env": null`; the strict peer answered neither, and relative paths were
    resolved against the peer's working directory, outside its root."""
    async with HubSandbox.connect(
        strict_stack.hub.url, "strict", strict_stack.client_token, request_timeout=10
    ) as sb:
        for i in range(4):
            await sb.files.write(f"tour/f{i}.txt", f"file {i}\n")
        assert (strict_stack.root / "tour" / "f3.txt").read_text() == "file 3\n"
        assert await sb.files.read("tour/f0.txt") == "file 0\n"
        assert sorted(e.name for e in await sb.files.list("tour")) == [
            f"f{i}.txt" for i in range(4)
        ]
        result = await sb.commands.run("cat f1.txt", cwd="tour")
        assert result.stdout == "file 1\n"
        result = await sb.commands.run(["pwd"])
        assert Path(result.stdout.strip()).resolve() == strict_stack.root.resolve()


@pytest.mark.hub_args("--slow-consumer-seconds", "2")
async def test_a_client_that_stops_reading_stalls_no_other_client(strict_stack: Stack) -> None:
    """Before: two large FILE_READ answers to a client that did not read held
    the agent's read loop at the hub; every other client waited 25 s and more."""
    big = strict_stack.root / "big"
    big.mkdir()
    for i in range(2):
        (big / f"b{i}").write_bytes(os.urandom(7 << 20))
    _reader, writer = await _stalled_socket(strict_stack)
    try:
        for i in range(2):
            payload = {"path": str(big / f"b{i}"), "encoding": "base64", "format": "bytes"}
            writer.write(_masked_text(frame("FILE_READ", f"big{i}", payload)))
        await writer.drain()
        await asyncio.sleep(1.0)
        async with HubSandbox.connect(
            strict_stack.hub.url, "strict", strict_stack.client_token
        ) as sb:
            worst = 0.0
            for _ in range(15):
                started = time.monotonic()
                await asyncio.wait_for(sb.files.exists(str(strict_stack.root / "x")), 10)
                worst = max(worst, time.monotonic() - started)
                await asyncio.sleep(0.2)
        assert worst < 1.5
        assert strict_stack.peer.alive()
    finally:
        writer.transport.abort()


@pytest.mark.hub_args("--overload-backoff", "0.2")
@pytest.mark.peer_args("--commands-per-minute", "2")
async def test_rate_limit_refusals_back_off_and_end(strict_stack: Stack) -> None:
    """Before: SHIM_OVERLOADED was re-issued at once, eight times in a row."""
    async with HubSandbox.connect(strict_stack.hub.url, "strict", strict_stack.client_token) as sb:
        started = time.monotonic()
        outcomes = await asyncio.gather(
            *(sb.commands.run(f"echo {i}") for i in range(4)), return_exceptions=True
        )
        elapsed = time.monotonic() - started
    served = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, OverloadedError)]
    assert len(served) == 2 and len(refused) == 2, outcomes
    refusals = sum("refused" in line for line in strict_stack.peer.log_tail)
    assert refusals <= 2 * 5  # each refused command at most five times
    assert elapsed >= 0.2 + 0.4 + 0.8 + 1.6  # and not in a tight loop


@pytest.mark.hub_args("--retry-window", "2", "--overload-backoff", "5")
@pytest.mark.peer_args("--max-concurrent", "1")
async def test_a_refused_command_is_never_reported_as_maybe_run(strict_stack: Stack) -> None:
    """Before: the refused command came back OUTCOME_UNKNOWN once the agent was gone."""
    async with HubSandbox.connect(strict_stack.hub.url, "strict", strict_stack.client_token) as sb:
        running = asyncio.ensure_future(sb.commands.run("sleep 5"))
        await asyncio.sleep(0.5)
        refused = asyncio.ensure_future(sb.commands.run("touch never"))
        await asyncio.sleep(1.0)  # refused with SHIM_OVERLOADED, waiting out its backoff
        strict_stack.peer.signal(9)
        outcomes = await asyncio.wait_for(
            asyncio.gather(running, refused, return_exceptions=True), 15
        )
    codes = [o.code if isinstance(o, HubError) else o for o in outcomes]
    assert codes == ["OUTCOME_UNKNOWN", "AGENT_NOT_CONNECTED"]
    assert not (strict_stack.root / "never").exists()


async def _stalled_socket(stack: Stack) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client WebSocket opened by hand, which will never read."""
    import base64

    host, port = stack.hub.url.removeprefix("ws://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /v1/sessions/{stack.session}/client HTTP/1.1\r\nHost: {host}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {stack.client_token}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    return reader, writer


def _masked_text(data: bytes) -> bytes:
    length = len(data)
    if length < 126:
        header = bytes([0x81, 0x80 | length])
    elif length < 65536:
        header = bytes([0x81, 0x80 | 126]) + length.to_bytes(2, "big")
    else:
        header = bytes([0x81, 0x80 | 127]) + length.to_bytes(8, "big")
    return header + b"\x00\x00\x00\x00" + data
