"""Peer processes for `bench/relay.py`: echo server, minimal relay, fake agent.

Each runs in its own process (so that its CPU time can be read from /proc) on
uvloop, prints one line to stdout when it is ready, and serves until SIGTERM:

    python bench/_relay_peers.py echo
    python bench/_relay_peers.py minimal
    python bench/_relay_peers.py agent --url ws://HOST:PORT --session ID [--token T]

`echo` and `minimal` print ``listening on ws://HOST:PORT``; `agent` prints
``ready`` once its HELLO was answered by a HELLO_ACK.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import signal
import sys
import time
import uuid
from collections.abc import Coroutine
from typing import Any

import msgspec
import uvloop
from aiohttp import WSMsgType, web
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tetherbed.agent.actions import Close, Log, Ready, Run, Send
from tetherbed.agent.config import Limits
from tetherbed.agent.protocol import AgentProtocol
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.host import normalize_arch
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.messages import Capability, FileStatResponse, Hello, MessageType

#: The fake agent's local policy; the hub is started with the same ceiling.
AGENT_MAX_CONCURRENT = 128


def _until_signalled(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on uvloop; SIGTERM/SIGINT cancel it and the process exits 0."""

    async def runner() -> None:
        task = asyncio.ensure_future(main)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass

    uvloop.run(runner())


def _announce(line: str) -> None:
    print(line, flush=True)


# --- echo: a raw `websockets` server sending every frame back -----------------


async def _echo_handler(conn: ServerConnection) -> None:
    try:
        while True:
            data = await conn.recv(decode=False)
            await conn.send(data, text=True)
    except ConnectionClosed:
        pass


async def run_echo() -> None:
    async with serve(
        _echo_handler,
        "127.0.0.1",
        0,
        compression=None,
        max_size=FRAME_LIMIT_BYTES,
        ping_interval=None,
    ) as server:
        host, port = next(iter(server.sockets)).getsockname()[:2]
        _announce(f"listening on ws://{host}:{port}")
        await asyncio.Future()


# --- minimal: the hub's shape on aiohttp, forwarding bytes untouched ------------


class _HelloId(msgspec.Struct):
    id: str


class MinimalRelay:
    """One client, one agent; frames are copied across without being parsed.

    The only parsing is the agent's HELLO (once per connection), which must be
    answered with a HELLO_ACK carrying its id for the agent to start serving.
    """

    def __init__(self) -> None:
        self.agent: web.WebSocketResponse | None = None
        self.client: web.WebSocketResponse | None = None
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/ws/local-executor/{session_id}", self._agent),
                web.get("/v1/sessions/{session_id}/client", self._client),
            ]
        )

    @staticmethod
    async def _upgrade(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(
            compress=False,
            max_msg_size=FRAME_LIMIT_BYTES,
            autoping=True,
            heartbeat=None,
            decode_text=False,
        )
        await ws.prepare(request)
        return ws

    async def _agent(self, request: web.Request) -> web.WebSocketResponse:
        ws = await self._upgrade(request)
        hello = await ws.receive()
        if hello.type is not WSMsgType.TEXT:
            await ws.close()
            return ws
        await ws.send_frame(
            _hello_ack(hello.data, request.match_info["session_id"]), WSMsgType.TEXT
        )
        self.agent = ws
        try:
            async for message in ws:
                if message.type is WSMsgType.TEXT or message.type is WSMsgType.BINARY:
                    client = self.client
                    if client is not None and not client.closed:
                        await client.send_frame(message.data, WSMsgType.TEXT)
        finally:
            if self.agent is ws:
                self.agent = None
        return ws

    async def _client(self, request: web.Request) -> web.WebSocketResponse:
        ws = await self._upgrade(request)
        self.client = ws
        try:
            async for message in ws:
                if message.type is WSMsgType.TEXT or message.type is WSMsgType.BINARY:
                    agent = self.agent
                    if agent is not None and not agent.closed:
                        await agent.send_frame(message.data, WSMsgType.TEXT)
        finally:
            if self.client is ws:
                self.client = None
        return ws


def _hello_ack(hello: bytes, session_id: str) -> bytes:
    return msgspec.json.encode(
        {
            "type": "HELLO_ACK",
            "id": msgspec.json.decode(hello, type=_HelloId).id,
            "ts": time.time(),
            "version": "1.1",
            "payload": {
                "session_id": session_id,
                "connection_id": "minimal",
                "protocol_version": "1.1",
                "granted_capabilities": ["files"],
                "max_concurrent": AGENT_MAX_CONCURRENT,
            },
        }
    )


async def run_minimal() -> None:
    relay = MinimalRelay()
    runner = web.AppRunner(relay.app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, reuse_address=True)
    await site.start()
    host, port = runner.addresses[0][:2]
    _announce(f"listening on ws://{host}:{port}")
    try:
        await asyncio.Future()
    finally:
        await runner.cleanup()


# --- agent: the real AgentProtocol, answering every FILE_STAT at once -----------


async def run_agent(url: str, session_id: str, token: str) -> None:
    hello = Hello(
        shim_version="bench",
        protocol_version="1.1",
        machine_id=f"bench-{uuid.uuid4().hex[:12]}",
        platform="linux",
        arch=normalize_arch(platform.machine()),
        capabilities=[str(Capability.FILES)],
        allowed_root="/bench",
    )
    protocol = AgentProtocol(
        hello=hello,
        local_limits=Limits(max_concurrent=AGENT_MAX_CONCURRENT),
        clock=SystemClock(),
        new_id=lambda: uuid.uuid4().hex,
        session_id=session_id,
    )
    answer = FileStatResponse(exists=False)
    conn = await connect(
        f"{url.rstrip('/')}/ws/local-executor/{session_id}",
        additional_headers={"Authorization": f"Bearer {token}"},
        compression=None,
        max_size=FRAME_LIMIT_BYTES,
        ping_interval=None,
        proxy=None,
    )
    try:
        await conn.send(protocol.start().data, text=True)
        while True:
            data = await conn.recv(decode=False)
            for action in protocol.receive(data):
                if type(action) is Run:
                    for reply in protocol.complete(
                        action.request_id, MessageType.FILE_STAT_RESPONSE, answer
                    ):
                        if type(reply) is Send:
                            await conn.send(reply.data, text=True)
                elif type(action) is Send:
                    await conn.send(action.data, text=True)
                elif type(action) is Ready:
                    _announce("ready")
                elif type(action) is Close:
                    print(f"agent: closing {action.code} {action.reason}", file=sys.stderr)
                    await conn.close(action.code, action.reason[:120])
                    return
                elif type(action) is Log:
                    print(f"agent: {action.level}: {action.message}", file=sys.stderr)
    except ConnectionClosed as exc:
        print(f"agent: connection closed: {exc}", file=sys.stderr)
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    peers = parser.add_subparsers(dest="peer", required=True)
    peers.add_parser("echo", help="raw websockets echo server")
    peers.add_parser("minimal", help="minimal aiohttp relay")
    agent = peers.add_parser("agent", help="fake agent speaking the real protocol")
    agent.add_argument("--url", required=True, help="relay base URL, ws://HOST:PORT")
    agent.add_argument("--session", required=True)
    agent.add_argument("--token", default="none")
    args = parser.parse_args(argv)
    if args.peer == "echo":
        _until_signalled(run_echo())
    elif args.peer == "minimal":
        _until_signalled(run_minimal())
    else:
        _until_signalled(run_agent(args.url, args.session, args.token))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
