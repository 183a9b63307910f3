"""A stand-in third-party hub: the reference relay behind a client API of its own.

Tetherbed's test suite needs a hub that is not Tetherbed's, the way a user's
platform is not: it speaks the spec to agents (here through the reference
relay, which is what a user would bring anyway), but its client and admin
APIs are its own, it keeps no Tetherbed event log, and it is started as a
command with its tokens written to a file. Its adapters are in
`standin_adapters.py`; `standin_target.py` describes it as a target.

Client API (header `X-Api-Key: <client token>`):

- `GET /standin/sessions/{session}/stream` — Server-Sent Events: first
  `event: ready` with `{"channel": ID}`, then one `event: answer` per answer,
  `{"ref": REQUEST_ID, "kind": TYPE, "body": PAYLOAD}`; the stream ends when
  the channel is gone.
- `POST /standin/sessions/{session}/calls` — `{"channel", "ref", "method",
  "args"}`: one request; 202 when accepted.
- `POST /standin/admin/revoke` `{"session"}`, `POST /standin/admin/shutdown`,
  `GET /standin/admin/sessions`.

Tetherbed's own `/v1` client API is closed to the outside. `--silent-last-
write-wins` makes it the v0 platform the spec warns about, without saying so
anywhere: a mutation that only the wire can show.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import secrets
import signal
import socket
import ssl
import sys
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from tetherbed.hub.config import OwnershipPolicy
from tetherbed.hub.server import HubServer
from tetherbed.hub.store import HubStore
from tetherbed.simulator.backends.sim import hub_config

INTERNAL = "X-Standin-Internal"


class Channel:
    """One client's stream: an internal Tetherbed-API socket, answers as SSE."""

    def __init__(self, ident: str, bridge: aiohttp.ClientWebSocketResponse) -> None:
        self.ident = ident
        self.socket = bridge
        self.answers: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()


class StandinHub:
    def __init__(self, args: argparse.Namespace) -> None:
        options = json.loads(args.options or "{}")
        options.pop("defects", None)  # a third party has no such switches
        options.pop("tokens", None)
        config = hub_config(options)
        if args.silent_last_write_wins:
            config.ownership = OwnershipPolicy.LAST_WRITE_WINS
        state = Path(args.state)
        state.mkdir(parents=True, exist_ok=True)
        self.store = HubStore(state / "hub.sqlite3")
        self.server = HubServer(config, self.store, observer=None)
        self.secret = secrets.token_hex(16)
        self.port = args.port
        self.channels: dict[str, Channel] = {}
        self.numbers = itertools.count(1)
        self.http: aiohttp.ClientSession | None = None
        self.stop = asyncio.Event()
        app = self.server.app
        app.middlewares.append(self._only_standin_outside)
        app.add_routes(
            [
                web.get("/standin/sessions/{session}/stream", self._stream),
                web.post("/standin/sessions/{session}/calls", self._call),
                web.post("/standin/admin/revoke", self._revoke),
                web.post("/standin/admin/shutdown", self._shutdown),
                web.get("/standin/admin/sessions", self._sessions),
            ]
        )
        tokens: dict[str, dict[str, str]] = {}
        for user in filter(None, (args.users or "alice").split(",")):
            tokens[user] = {
                kind: self.store.create_token(user, kind) for kind in ("agent", "client")
            }
        (state / "tokens.yaml").write_text(yaml.safe_dump(tokens), encoding="utf-8")

    @web.middleware
    async def _only_standin_outside(self, request: web.Request, handler: Any) -> Any:
        if request.path.startswith("/v1/") and request.headers.get(INTERNAL) != self.secret:
            return web.json_response({"error": "no such API here"}, status=404)
        return await handler(request)

    def _internal(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}", INTERNAL: self.secret}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- the client API -------------------------------------------------------------

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("X-Api-Key", "")
        session = request.match_info["session"]
        assert self.http is not None
        try:
            bridge = await self.http.ws_connect(
                f"ws://127.0.0.1:{self.port}/v1/sessions/{session}/client",
                headers=self._internal(key),
                max_msg_size=16 * 1024 * 1024,
            )
        except aiohttp.WSServerHandshakeError as exc:
            return web.json_response({"error": "refused"}, status=exc.status)
        channel = Channel(f"ch{next(self.numbers)}", bridge)
        self.channels[channel.ident] = channel
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_event("ready", {"channel": channel.ident}))
        try:
            async for message in bridge:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                frame = json.loads(message.data)
                answer = {
                    "ref": frame.get("id"),
                    "kind": frame.get("type"),
                    "body": frame.get("payload"),
                }
                await response.write(_event("answer", answer))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.channels.pop(channel.ident, None)
            await bridge.close()
        return response

    async def _call(self, request: web.Request) -> web.Response:
        body = await request.json()
        channel = self.channels.get(str(body.get("channel")))
        if channel is None:
            return web.json_response({"error": "no such channel"}, status=404)
        frame = {
            "type": body.get("method"),
            "id": body.get("ref"),
            "ts": asyncio.get_running_loop().time(),
            "version": "1.1",
            "payload": body.get("args") or {},
        }
        await channel.socket.send_str(json.dumps(frame))
        return web.json_response({"queued": True}, status=202)

    # --- the admin API ----------------------------------------------------------------

    async def _revoke(self, request: web.Request) -> web.Response:
        body = await request.json()
        assert self.http is not None
        url = f"{self.base}/v1/sessions/{body.get('session')}/revoke"
        async with self.http.post(
            url, headers=self._internal(request.headers.get("X-Api-Key", ""))
        ) as answer:
            return web.json_response(await answer.json(content_type=None), status=answer.status)

    async def _shutdown(self, request: web.Request) -> web.Response:
        asyncio.get_running_loop().call_later(0.05, self.stop.set)
        return web.json_response({"stopping": True}, status=202)

    async def _sessions(self, request: web.Request) -> web.Response:
        assert self.http is not None
        headers = self._internal(request.headers.get("X-Api-Key", ""))
        async with self.http.get(f"{self.base}/v1/sessions", headers=headers) as answer:
            body = await answer.json(content_type=None)
        return web.json_response([s["session_id"] for s in body.get("sessions", [])])

    # --- running ----------------------------------------------------------------------

    async def run(self, context: ssl.SSLContext | None) -> None:
        self.http = aiohttp.ClientSession()
        runner = web.AppRunner(self.server.app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=context, reuse_address=True)
        await site.start()
        if context is not None:
            # The internal bridge speaks plain HTTP on a port of its own.
            self.port = await self._plain_site(runner)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop.set)
        await self.stop.wait()
        for channel in list(self.channels.values()):
            await channel.socket.close()
        await self.http.close()
        await runner.cleanup()
        self.store.close()

    async def _plain_site(self, runner: web.AppRunner) -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        await web.TCPSite(runner, "127.0.0.1", port, reuse_address=True).start()
        return port


def _event(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--users", default="alice")
    parser.add_argument("--options", default="{}", help="the scenario's hub options, JSON")
    parser.add_argument("--silent-last-write-wins", action="store_true")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    args = parser.parse_args(argv)
    context = None
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
    asyncio.run(StandinHub(args).run(context))
    return 0


if __name__ == "__main__":
    sys.exit(main())
