"""`tetherbed llm-server`: the core over HTTP (aiohttp), as Ollama serves it.

Prints `tetherbed llm-server listening on http://HOST:PORT` once it listens
(the port actually bound when `--listen` gave port 0) and exits 0 on SIGTERM
or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from tetherbed.runtime import event_loop
from tetherbed.runtime.clock import SystemClock
from tetherbed.simulator.peripherals.llm_server.config import (
    DEFAULT_MODELS,
    FAILURE_MODES,
    LlmServerConfig,
)
from tetherbed.simulator.peripherals.llm_server.core import LlmServerCore, Reply
from tetherbed.simulator.peripherals.llm_server.runner import GenerationRunner

log = logging.getLogger("tetherbed.llm_server")

#: Ollama's default port.
DEFAULT_PORT = 11434
#: Request bodies above this are refused (413) before they are read.
MAX_BODY_BYTES = 16 * 1024 * 1024
NDJSON = "application/x-ndjson"


class _HttpResponder:
    """Writes one answer onto an aiohttp request."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None
        self.was_cut = False

    async def reply(self, reply: Reply) -> None:
        if isinstance(reply.body, dict):
            self.response = web.json_response(reply.body, status=reply.status)
        else:
            self.response = web.Response(text=reply.body, status=reply.status)

    async def start_stream(self) -> None:
        response = web.StreamResponse(status=200, headers={"Content-Type": NDJSON})
        response.enable_chunked_encoding()
        await response.prepare(self.request)
        self.response = response

    async def write_line(self, line: bytes) -> None:
        assert self.response is not None
        await self.response.write(line)

    async def end(self) -> None:
        assert self.response is not None
        await self.response.write_eof()

    async def cut(self) -> None:
        """Break the connection: no final chunk, the client sees it end early."""
        self.was_cut = True
        transport = self.request.transport
        if transport is not None:
            transport.abort()


def build_app(config: LlmServerConfig) -> web.Application:
    runner = GenerationRunner(LlmServerCore(config), SystemClock())

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return web.json_response({"error": "request body too large"}, status=413)
        body = await request.read() if request.method == "POST" else b""
        out = _HttpResponder(request)
        await runner.serve(request.method, request.path, body, out)
        if out.response is None:  # cut before any answer: nothing reaches the client
            assert out.was_cut
            return web.Response(status=500)
        return out.response

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_route("*", "/{tail:.*}", handle)
    app["runner"] = runner
    return app


async def serve(config: LlmServerConfig, host: str, port: int) -> None:
    app_runner = web.AppRunner(build_app(config), access_log=None)
    await app_runner.setup()
    site = web.TCPSite(app_runner, host, port)
    await site.start()
    server = site._server  # the bound socket, for the port when 0 was asked
    bound = server.sockets[0].getsockname()[:2] if server is not None else (host, port)
    print(f"tetherbed llm-server listening on http://{bound[0]}:{bound[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await app_runner.cleanup()


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


def build_parser() -> argparse.ArgumentParser:
    defaults = LlmServerConfig()
    parser = argparse.ArgumentParser(
        prog="tetherbed llm-server",
        description="An Ollama-compatible LLM server with deterministic output, for the test bed.",
    )
    parser.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", DEFAULT_PORT),
        help=f"HOST:PORT (default 127.0.0.1:{DEFAULT_PORT}; port 0 picks a free one)",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help=f"a model to serve (repeatable; default: {', '.join(DEFAULT_MODELS)})",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--latency-ms", type=float, default=defaults.latency_ms, help="time to the first token"
    )
    parser.add_argument(
        "--load-ms", type=float, default=defaults.load_ms, help="extra time to load a model"
    )
    parser.add_argument("--tokens-per-second", type=float, default=defaults.tokens_per_second)
    parser.add_argument(
        "--max-output-tokens",
        type=int,
        default=defaults.max_output_tokens,
        help="longest answer the model chooses itself",
    )
    parser.add_argument(
        "--fail-rate", type=float, default=defaults.fail_rate, help="share of failing generations"
    )
    parser.add_argument("--fail-mode", choices=FAILURE_MODES, default=defaults.fail_mode)
    parser.add_argument(
        "--fail-model", action="append", default=[], help="every generation of it fails"
    )
    parser.add_argument(
        "--missing-model",
        action="append",
        default=[],
        help="listed, but answers 404 when used (removed after listing)",
    )
    parser.add_argument(
        "--parallel", type=int, default=defaults.parallel, help="OLLAMA_NUM_PARALLEL (1)"
    )
    parser.add_argument(
        "--max-queue", type=int, default=defaults.max_queue, help="OLLAMA_MAX_QUEUE (512)"
    )
    parser.add_argument("--log-level", default="WARNING", help=argparse.SUPPRESS)
    return parser


def config_from(args: argparse.Namespace) -> LlmServerConfig:
    return LlmServerConfig(
        models=tuple(dict.fromkeys(args.model)) or DEFAULT_MODELS,
        seed=args.seed,
        latency_ms=args.latency_ms,
        load_ms=args.load_ms,
        tokens_per_second=args.tokens_per_second,
        max_output_tokens=args.max_output_tokens,
        fail_rate=args.fail_rate,
        fail_mode=args.fail_mode,
        fail_models=frozenset(args.fail_model),
        missing_models=frozenset(args.missing_model),
        parallel=args.parallel,
        max_queue=args.max_queue,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr)
    try:
        config = config_from(args)
    except ValueError as exc:
        parser.error(str(exc))
    host, port = args.listen
    try:
        event_loop.run(serve(config, host, port))
    except OSError as exc:
        print(f"tetherbed llm-server: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
