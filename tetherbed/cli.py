"""`tetherbed` command line: hub, agent, demo."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from tetherbed import __version__, aio


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tetherbed", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tetherbed {__version__}")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    commands = parser.add_subparsers(dest="command", required=True)

    hub = commands.add_parser("hub", help="run the hub, or manage its state")
    hub.add_argument("--listen", type=_host_port, default=("127.0.0.1", 8765))
    hub.add_argument("--state", help="directory for the hub's SQLite state (required)")
    _hub_limits(hub)
    hub_commands = hub.add_subparsers(dest="hub_command")
    token = hub_commands.add_parser("token", help="bearer tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = token_commands.add_parser("create", help="print one new bearer token")
    create.add_argument("--state", required=True)
    create.add_argument("--user", required=True)
    create.add_argument("--kind", required=True, choices=["agent", "client"])
    session = hub_commands.add_parser("session", help="sessions")
    session_commands = session.add_subparsers(dest="session_command", required=True)
    new_session = session_commands.add_parser("create", help="print one new session id")
    new_session.add_argument("--state", required=True)
    new_session.add_argument("--user", required=True)

    agent = commands.add_parser("agent", help="run an agent (shim) that dials the hub")
    agent.add_argument("--hub", required=True, help="hub base URL, e.g. ws://127.0.0.1:8765")
    agent.add_argument("--token", required=True, help="agent bearer token")
    agent.add_argument("--root", required=True, help="the allowed root folder")
    agent.add_argument("--session-id", required=True, help="session to serve (legacy data mode)")
    agent.add_argument("--enable-shell", action="store_true", help="allow EXECUTE_COMMAND")
    agent.add_argument("--machine-id", default="", help="defaults to hostname-uuid")
    agent.add_argument("--max-concurrent", type=_positive_int, default=None)
    agent.add_argument("--max-file-size", type=_positive_int, default=None)
    agent.add_argument("--command-timeout", type=_positive_float, default=None)

    commands.add_parser("demo", help="start a hub and an agent, and tour them with the client")
    return parser


def _hub_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-file-size", type=_positive_int, default=None)
    parser.add_argument("--command-timeout", type=_positive_int, default=None)
    parser.add_argument("--max-concurrent", type=_positive_int, default=None)
    parser.add_argument("--ping-interval", type=_positive_float, default=None)
    parser.add_argument("--pong-timeout", type=_positive_float, default=None)
    parser.add_argument("--queue-limit", type=_positive_int, default=None)
    parser.add_argument(
        "--ownership",
        choices=["reference", "evict-old", "last-write-wins"],
        default="reference",
        help="how a second agent claiming a session is handled (docs/spec-notes.md)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "hub":
        return _hub(args)
    if args.command == "agent":
        return _agent(args)
    if args.command == "demo":
        from tetherbed.demo import main as demo_main

        return demo_main()
    raise AssertionError(args.command)


def _hub(args: argparse.Namespace) -> int:
    from tetherbed.hub.config import HubConfig, OwnershipPolicy
    from tetherbed.hub.store import HubStore

    if not args.state:
        print("tetherbed hub: --state DIR is required", file=sys.stderr)
        return 2
    store = HubStore(args.state)
    if args.hub_command == "token":
        print(store.create_token(args.user, args.kind))
        return 0
    if args.hub_command == "session":
        print(store.create_session(args.user).session_id)
        return 0
    from tetherbed.hub.server import serve

    config = HubConfig(ownership=OwnershipPolicy(args.ownership))
    for option, field in [
        ("max_file_size", "max_file_size_bytes"),
        ("command_timeout", "command_timeout_seconds"),
        ("max_concurrent", "max_concurrent"),
        ("ping_interval", "ping_interval"),
        ("pong_timeout", "pong_timeout"),
        ("queue_limit", "queue_limit"),
    ]:
        value = getattr(args, option)
        if value is not None:
            setattr(config, field, value)
    host, port = args.listen
    aio.run(serve(config, store, host, port))
    return 0


def _agent(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tetherbed.agent.config import AgentConfig, Limits
    from tetherbed.agent.runtime import AgentRuntime
    from tetherbed.ws_transport import connect_websocket

    root = Path(args.root)
    if not root.is_dir():
        print(f"tetherbed agent: --root {args.root} is not a directory", file=sys.stderr)
        return 2
    defaults = Limits()
    limits = Limits(
        max_file_size_bytes=args.max_file_size or defaults.max_file_size_bytes,
        command_timeout_seconds=args.command_timeout or defaults.command_timeout_seconds,
        max_concurrent=args.max_concurrent or defaults.max_concurrent,
    )
    config = AgentConfig(
        hub_url=args.hub,
        token=args.token,
        root=str(root.resolve()),
        session_id=args.session_id,
        machine_id=args.machine_id,
        enable_shell=args.enable_shell,
        local_limits=limits,
    )

    async def run() -> int:
        runtime = AgentRuntime(config, connector=connect_websocket)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: asyncio.ensure_future(runtime.shutdown()))
        stop = await runtime.run()
        if stop.exit_code:
            print(f"tetherbed agent: {stop.reason}", file=sys.stderr)
        return int(stop.exit_code)

    return aio.run(run())


if __name__ == "__main__":
    raise SystemExit(main())
