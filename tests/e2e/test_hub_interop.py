"""The hub and the client SDK against strict peers, on real processes.

Two peers, both real processes:

- `tetherbed agent --strict-wire`: Tetherbed's agent in the profile that
  imitates the public reference shim's validation — a request the spec's
  strict schema refuses, or a frame of another major version, is dropped
  without any answer;
- `public_shim_double.py`: a small double of the public shim for the two
  behaviours the strict profile leaves out: SHIM_OVERLOADED for its
  per-minute command rate, and relative paths resolved against its own
  working directory.

Each test is a finding of the hub/client interop issue; it failed before the
fix (see its docstring for how).
"""

from __future__ import annotations

import asyncio
import base64
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
from tetherbed.launch import HubProcess, ManagedProcess, start_agent, start_hub
from tetherbed.runtime.event_log import read_events
from tetherbed.runtime.websocket_transport import connect_websocket

pytestmark = pytest.mark.e2e

DOUBLE_SCRIPT = Path(__file__).with_name("public_shim_double.py")
SESSION = "interop"


def start_double(
    hub: HubProcess, token: str, root: Path, *, cwd: Path, args: list[str]
) -> ManagedProcess:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(DOUBLE_SCRIPT),
            *("--hub", hub.url, "--token", token, "--session-id", SESSION),
            *("--root", str(root), "--machine-id", "shim-double", *args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd=cwd,
    )
    managed = ManagedProcess("shim-double", proc)
    threading.Thread(target=_keep_tail, args=(proc, managed.log_tail), daemon=True).start()
    return managed


def _keep_tail(proc: subprocess.Popen[bytes], tail: deque[str]) -> None:
    assert proc.stderr is not None
    for raw in iter(proc.stderr.readline, b""):
        tail.append(raw.decode("utf-8", "replace").rstrip())


def start_strict_agent(
    hub: HubProcess, token: str, root: Path, *, machine: str = "m1", args: list[str] = ()
) -> ManagedProcess:
    return start_agent(
        hub.url,
        token,
        root,
        SESSION,
        machine_id=machine,
        enable_shell=True,
        args=["--strict-wire", *args],
        name=f"strict-agent-{machine}",
    )


@dataclass
class Stack:
    hub: HubProcess
    peer: ManagedProcess
    agent_token: str
    client_token: str
    root: Path
    #: The hub's journal (`--events`).
    events: Path

    def hub_events(self, name: str) -> list[dict]:
        return [e for e in read_events(self.events) if e.get("event") == name]


@pytest.fixture(params=["strict-wire"])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    """A hub (`@pytest.mark.hub_args`) and one peer: the real agent with
    `--strict-wire`, or (param "double") the public-shim double, started in a
    folder outside its root (`@pytest.mark.peer_args` for either)."""
    hub_args = request.node.get_closest_marker("hub_args")
    peer_args = request.node.get_closest_marker("peer_args")
    events = tmp_path / "hub-events.jsonl"
    args = [*(hub_args.args if hub_args else ()), "--events", str(events)]
    hub = start_hub(tmp_path / "hub", args=args)
    peer = None
    try:
        root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
        root.mkdir()
        elsewhere.mkdir()
        agent_token, client_token = hub.token("alice", "agent"), hub.token("alice", "client")
        extra = list(peer_args.args) if peer_args else []
        if request.param == "double":
            peer = start_double(hub, agent_token, root, cwd=elsewhere, args=extra)
        else:
            peer = start_strict_agent(hub, agent_token, root, args=extra)
        hub.wait_connected(client_token, SESSION)
        yield Stack(hub, peer, agent_token, client_token, root, events)
    finally:
        if peer is not None:
            peer.stop()
        hub.stop()


def double_too(test):  # type: ignore[no-untyped-def]
    """Run the test against both peers."""
    return pytest.mark.parametrize("stack", ["strict-wire", "double"], indirect=True)(test)


def double_only(test):  # type: ignore[no-untyped-def]
    return pytest.mark.parametrize("stack", ["double"], indirect=True)(test)


async def raw_client(stack: Stack):  # type: ignore[no-untyped-def]
    url = f"{stack.hub.url}/v1/sessions/{SESSION}/client"
    return await connect_websocket(url, {"Authorization": f"Bearer {stack.client_token}"})


def frame(kind: str, request_id: str, payload: dict, version: str = "1.1") -> bytes:
    return msgspec.json.encode(
        {"type": kind, "id": request_id, "ts": time.time(), "version": version, "payload": payload}
    )


@double_too
@pytest.mark.hub_args("--request-timeout", "3")
async def test_four_requests_of_another_major_do_not_kill_the_session(stack: Stack) -> None:
    """Before: the hub forwarded the client's "2.0"; the peer dropped all four,
    which then held every slot, and the fifth request was never answered."""
    transport = await raw_client(stack)
    try:
        path = str(stack.root / "missing")
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


@double_too
@pytest.mark.hub_args("--request-timeout", "2")
async def test_requests_a_strict_peer_drops_time_out_and_free_their_slots(stack: Stack) -> None:
    """Before: four dropped requests (= max_concurrent) held their slots until
    the agent reconnected; every later request of every client waited."""
    transport = await raw_client(stack)
    try:
        for i in range(4):  # an unknown field: a strict peer never answers
            await transport.send(frame("FILE_STAT", f"drop{i}", {"path": "/x", "zzz": 1}))
        started = time.monotonic()
        answers = [
            msgspec.json.decode(await asyncio.wait_for(transport.recv(), 10)) for _ in range(4)
        ]
        assert time.monotonic() - started < 6
    finally:
        await transport.close()
    assert {a["payload"]["code"] for a in answers} == {"AGENT_TIMEOUT"}
    async with HubSandbox.connect(stack.hub.url, SESSION, stack.client_token) as sb:
        assert await asyncio.wait_for(sb.files.exists(str(stack.root / "x")), 5) is False


@double_too
async def test_the_readme_tour_works_against_a_strict_peer(stack: Stack) -> None:
    """Before: files.write put `format` into FILE_WRITE and commands.run sent
    `"env": null`; a strict peer answered neither. And relative paths went out
    as given, which the public shim resolves against its own working
    directory, outside its root (the double does the same)."""
    async with HubSandbox.connect(
        stack.hub.url, SESSION, stack.client_token, request_timeout=15
    ) as sb:
        for i in range(4):
            await sb.files.write(f"tour/f{i}.txt", f"file {i}\n")
        assert (stack.root / "tour" / "f3.txt").read_text() == "file 3\n"
        assert await sb.files.read("tour/f0.txt") == "file 0\n"
        names = sorted(e.name for e in await sb.files.list("tour"))
        assert names == [f"f{i}.txt" for i in range(4)]
        result = await sb.commands.run("cat f1.txt", cwd="tour")
        assert result.stdout == "file 1\n"
        result = await sb.commands.run(["pwd"])
        assert Path(result.stdout.strip()).resolve() == stack.root.resolve()


@pytest.mark.hub_args("--slow-consumer-seconds", "2")
async def test_a_client_that_stops_reading_stalls_no_other_client(stack: Stack) -> None:
    """Before: two large FILE_READ answers to a client that did not read held
    the agent's read loop at the hub; every other client waited 25 s and more."""
    big = stack.root / "big"
    big.mkdir()
    for i in range(2):
        (big / f"b{i}").write_bytes(os.urandom(7 << 20))
    reader, writer = await _stalled_socket(stack)
    try:
        for i in range(2):
            payload = {"path": str(big / f"b{i}"), "encoding": "base64", "format": "bytes"}
            writer.write(_masked_text(frame("FILE_READ", f"big{i}", payload)))
        await writer.drain()
        await asyncio.sleep(1.0)
        async with HubSandbox.connect(stack.hub.url, SESSION, stack.client_token) as sb:
            worst = 0.0
            for _ in range(15):
                started = time.monotonic()
                await asyncio.wait_for(sb.files.exists(str(stack.root / "x")), 10)
                worst = max(worst, time.monotonic() - started)
                await asyncio.sleep(0.2)
        assert worst < 1.5
        assert stack.peer.alive()
    finally:
        writer.transport.abort()
    del reader


@double_only
@pytest.mark.hub_args("--overload-backoff", "0.2")
@pytest.mark.peer_args("--commands-per-minute", "2")
async def test_rate_limit_refusals_back_off_and_end(stack: Stack) -> None:
    """Before: SHIM_OVERLOADED was re-issued at once, eight times in a row (a
    resend loop against the public shim's per-minute rate limit)."""
    async with HubSandbox.connect(stack.hub.url, SESSION, stack.client_token) as sb:
        started = time.monotonic()
        outcomes = await asyncio.gather(
            *(sb.commands.run(f"echo {i}") for i in range(4)), return_exceptions=True
        )
        elapsed = time.monotonic() - started
    served = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, OverloadedError)]
    assert len(served) == 2 and len(refused) == 2, outcomes
    refusals = sum("refused" in line for line in stack.peer.log_tail)
    assert refusals <= 2 * 5  # each refused command at most five times
    assert elapsed >= 0.2 + 0.4 + 0.8 + 1.6  # and not in a tight loop


@pytest.mark.hub_args("--retry-window", "4", "--overload-backoff", "5")
@pytest.mark.peer_args("--max-concurrent", "1")
async def test_a_refused_command_is_never_reported_as_maybe_run(
    stack: Stack, tmp_path: Path
) -> None:
    """Before: a command the agent refused with SHIM_OVERLOADED came back
    OUTCOME_UNKNOWN ("may or may not have run") once the agent was gone.

    The agent tells its limit (1) in a STATUS right after the handshake; two
    requests held for it while it was away go out with its HELLO_ACK, before
    that STATUS, so the second is refused."""
    async with HubSandbox.connect(stack.hub.url, SESSION, stack.client_token) as sb:
        stack.peer.signal(9)  # the session is now held for its machine
        await asyncio.sleep(0.5)
        running = asyncio.ensure_future(sb.commands.run("sleep 3"))
        refused = asyncio.ensure_future(sb.commands.run("touch never"))
        await asyncio.sleep(0.3)
        again = start_strict_agent(
            stack.hub, stack.agent_token, stack.root, args=["--max-concurrent", "1"]
        )
        try:
            stack.hub.wait_connected(stack.client_token, SESSION)
            await asyncio.sleep(1.0)  # sleep runs; touch was refused and waits out its back-off
            again.signal(9)
            outcomes = await asyncio.wait_for(
                asyncio.gather(running, refused, return_exceptions=True), 20
            )
        finally:
            again.stop()
    codes = [o.code if isinstance(o, HubError) else o for o in outcomes]
    assert [e["kind"] for e in stack.hub_events("overloaded_requeue")] == ["EXECUTE_COMMAND"]
    assert codes == ["OUTCOME_UNKNOWN", "AGENT_NOT_CONNECTED"]
    assert not (stack.root / "never").exists()


async def _stalled_socket(stack: Stack) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client WebSocket opened by hand, which will never read."""
    host, port = stack.hub.url.removeprefix("ws://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /v1/sessions/{SESSION}/client HTTP/1.1\r\nHost: {host}\r\n"
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
