"""The adapter bridge: a hub's own client API, offered to Locust as Tetherbed's.

Load clients run on gevent with the sync `websocket-client`; a target's
client adapter (docs/targets.md) is asyncio code. So when the target names
an adapter other than Tetherbed's own, `tetherbed load` starts this bridge —
an asyncio process beside Locust — and points the clients at it: each
WebSocket on `/v1/sessions/{session}/client` is one `adapter.open(session,
user)`; envelopes from the client become `send(id, type, payload)` and every
`Answer` goes back as an envelope, unchanged and in order. A refused open is
answered with its HTTP status (404 makes the client wait for the session).
The bridge's CPU is counted as the generator's in the summary.

    python -m tetherbed.load.adapter_bridge --access ACCESS.json --adapter MODULE:CLASS
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
from pathlib import Path

import msgspec
from aiohttp import WSMsgType, web

from tetherbed.runtime import event_loop
from tetherbed.simulator.targets import HubAccess, Tokens, client_adapter
from tetherbed.simulator.targets.adapters import (
    ClientAdapter,
    ConnectionLost,
    OpenRefused,
    SessionClient,
)
from tetherbed.simulator.targets.tls import TlsOptions
from tetherbed.wire.envelope import encode_message
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.version import CURRENT_TEXT


class _Envelope(msgspec.Struct):
    type: str = ""
    id: str | None = None
    payload: msgspec.Raw = msgspec.Raw(b"{}")


_decode = msgspec.json.Decoder(_Envelope).decode


def write_access(path: Path, access: HubAccess, tls: TlsOptions) -> None:
    """What the bridge needs to reach the hub, for `--access` (tokens included:
    the file lives in the run's own folder)."""
    table: dict[str, dict[str, str]] = {}
    for (user, kind), token in access.tokens.table.items():
        table.setdefault(user, {})[kind] = token
    document = {
        "url": access.url,
        "tokens": table,
        "ca": str(tls.ca) if tls.ca else None,
        "insecure": tls.insecure,
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    path.chmod(0o600)


def read_access(path: Path) -> HubAccess:
    raw = json.loads(path.read_text(encoding="utf-8"))
    tls = TlsOptions.from_mapping(
        {k: v for k, v in (("ca", raw.get("ca")), ("insecure", raw.get("insecure"))) if v},
        Path(),
        "--access",
    )
    url = str(raw["url"])
    ssl = tls.client_context() if url.startswith("wss://") else None
    return HubAccess(url, Tokens.parse(raw["tokens"], "--access"), ssl)


class Bridge:
    def __init__(self, adapter: ClientAdapter, user: str) -> None:
        self.adapter = adapter
        self.user = user
        self.app = web.Application()
        self.app.add_routes([web.get("/v1/sessions/{session}/client", self._client)])

    async def _client(self, request: web.Request) -> web.StreamResponse:
        session = request.match_info["session"]
        user = request.query.get("user", self.user)
        try:
            client = await self.adapter.open(session, user)
        except OpenRefused as exc:
            status = exc.status if isinstance(exc.status, int) else 503
            return web.json_response({"error": str(exc)}, status=status)
        except (OSError, ConnectionLost) as exc:
            return web.json_response({"error": str(exc)}, status=502)
        ws = web.WebSocketResponse(compress=False, max_msg_size=FRAME_LIMIT_BYTES + 1)
        await ws.prepare(request)
        answers = asyncio.ensure_future(self._answers(client, ws))
        try:
            async for message in ws:
                if message.type is not WSMsgType.TEXT and message.type is not WSMsgType.BINARY:
                    continue
                envelope = _decode(message.data)
                await client.send(envelope.id or "", envelope.type, bytes(envelope.payload))
        except (ConnectionLost, msgspec.MsgspecError):
            pass
        finally:
            answers.cancel()
            with contextlib.suppress(BaseException):
                await answers
            await client.close()
        return ws

    async def _answers(self, client: SessionClient, ws: web.WebSocketResponse) -> None:
        try:
            while True:
                answer = await client.receive()
                frame = encode_message(
                    answer.kind,
                    answer.request_id,
                    msgspec.Raw(answer.payload or b"{}"),
                    ts=time.time(),
                    version=CURRENT_TEXT,
                )
                await ws.send_str(frame.decode())
        except ConnectionLost:
            await ws.close(code=1011, message=b"the hub's client connection ended")


async def _serve(args: argparse.Namespace) -> int:
    access = read_access(args.access)
    adapter = client_adapter(args.adapter, access)
    bridge = Bridge(adapter, args.user)
    runner = web.AppRunner(bridge.app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    print(f"bridge listening on ws://{host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()
    await adapter.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--access", type=Path, required=True)
    parser.add_argument("--adapter", required=True, help="MODULE:CLASS")
    parser.add_argument("--user", required=True, help="the hub's user clients act as")
    return event_loop.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
