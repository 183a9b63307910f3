"""The hub against a strict peer: a real hub and `tetherbed agent --strict-wire`.

The strict profile drops, unanswered, every frame a strict peer's models refuse
(the public reference shim does). Here the hub's own frames (HELLO_ACK, PING
every half second) and what it relays of requests written as the spec shows
them must all be accepted — the session stays up and every request is
answered — while a request with a field the spec does not name goes
unanswered by the agent and costs the session nothing else.

The hub's deadline for requests that are never answered is the hub issue's
subject; its tests start the agent the same way (`args=["--strict-wire"]`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tetherbed.launch import start_agent, start_hub
from tetherbed.runtime.websocket_transport import WebsocketsTransport, connect_websocket

pytestmark = pytest.mark.e2e

SESSION = "strict"


def spec_requests(root: Path) -> list[tuple[str, dict[str, Any], str]]:
    """Requests exactly as the spec's examples write them, and the answer each gets."""
    return [
        (
            "FILE_WRITE",
            {
                "path": f"{root}/output.txt",
                "content": "hello world\n",
                "encoding": "utf-8",
                "create_parents": True,
            },
            "ACK",
        ),
        (
            "FILE_READ",
            {
                "path": f"{root}/output.txt",
                "encoding": "utf-8",
                "format": "text",
                "offset": 0,
                "length": None,
            },
            "FILE_CONTENTS",
        ),
        (
            "FILE_STAT",
            {"path": f"{root}/output.txt", "follow_symlinks": True},
            "FILE_STAT_RESPONSE",
        ),
        (
            "FILE_LIST",
            {
                "path": str(root),
                "glob": "*.txt",
                "recursive": False,
                "include_hidden": False,
                "max_entries": 1000,
            },
            "FILE_LIST_RESPONSE",
        ),
        (
            "FILE_MOVE",
            {"src": f"{root}/output.txt", "dst": f"{root}/b.txt", "overwrite": False},
            "ACK",
        ),
        (
            "EXECUTE_COMMAND",
            {
                "command": "ls -la",
                "argv": None,
                "shell": "auto",
                "cwd": str(root),
                "timeout_seconds": 30,
                "env": {"MY_VAR": "value"},
            },
            "COMMAND_RESULT",
        ),
        ("EXECUTE_COMMAND", {"argv": ["ls", "-la"], "cwd": str(root)}, "COMMAND_RESULT"),
        ("FILE_DELETE", {"path": f"{root}/b.txt", "recursive": False, "missing_ok": False}, "ACK"),
    ]


async def answer(transport: WebsocketsTransport, request_id: str, timeout: float) -> dict:
    async with asyncio.timeout(timeout):
        while True:
            frame = msgspec.json.decode(await transport.recv())
            if frame.get("id") == request_id:
                return frame


async def test_a_strict_peer_serves_a_whole_session_through_the_hub(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path)) / "root"
    root.mkdir()
    hub = start_hub(tmp_path / "hub", args=["--ping-interval", "0.5", "--pong-timeout", "1"])
    agent = None
    try:
        agent_token = hub.token("alice", "agent")
        client_token = hub.token("alice", "client")
        agent = start_agent(
            hub.url,
            agent_token,
            root,
            SESSION,
            enable_shell=True,
            machine_id="strict-machine",
            args=["--strict-wire", "--display=", "--state-dir", str(tmp_path / "state")],
        )
        hub.wait_connected(client_token, SESSION)
        url = f"{hub.url}/v1/sessions/{SESSION}/client"
        transport = await connect_websocket(url, {"Authorization": f"Bearer {client_token}"})
        try:
            for i, (kind, payload, expected) in enumerate(spec_requests(root)):
                rid = f"spec-{i}"
                data = {"type": kind, "id": rid, "ts": 1.0, "version": "1.1", "payload": payload}
                await transport.send(msgspec.json.encode(data))
                got = await answer(transport, rid, 20)
                assert got["type"] == expected, (kind, got)
            extra = {"path": str(root), "follow_symlinks": True, "trace_id": "t-1"}
            frame = {"type": "FILE_STAT", "id": "extra", "ts": 1.0, "version": "1.1"}
            await transport.send(msgspec.json.encode({**frame, "payload": extra}))
            with pytest.raises(TimeoutError):
                await answer(transport, "extra", 3)  # dropped by the agent, as the public shim does
            await asyncio.sleep(2)  # four more PING/PONG rounds: the hub keeps the agent
            stat = {"path": str(root), "follow_symlinks": True}
            await transport.send(msgspec.json.encode({**frame, "id": "after", "payload": stat}))
            assert (await answer(transport, "after", 20))["type"] == "FILE_STAT_RESPONSE"
        finally:
            await transport.close()
        assert agent.alive()
        assert "strict profile: dropped a frame" in agent.log()
        assert "trace_id" in agent.log()
    finally:
        if agent is not None:
            agent.stop()
        hub.stop()
