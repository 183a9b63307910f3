"""`tetherbed` command line: hub, agent, run, explore, conform, fuzz, native, proxy, demo."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tetherbed import __version__
from tetherbed.agent.config import AGENT_DEFECTS
from tetherbed.hub.config import HUB_DEFECTS, TUNABLE_OPTIONS, OwnershipPolicy
from tetherbed.runtime import event_loop
from tetherbed.wire.version import CURRENT_TEXT

if TYPE_CHECKING:
    from tetherbed.hub.dsh.config import DshConfig


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


def _hex4(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _log_level(parser: argparse.ArgumentParser, default: str = argparse.SUPPRESS) -> None:
    """`--log-level`, before the subcommand or after it (where people put it)."""
    parser.add_argument("--log-level", default=default, choices=LOG_LEVELS, help="default: INFO")


class _Parser(argparse.ArgumentParser):
    """Every subcommand's parser takes `--log-level` too."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if self.add_help:  # the pass-through stubs (run, native, proxy) parse their own
            _log_level(self)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tetherbed", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tetherbed {__version__}")
    _log_level(parser, default="INFO")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    hub = commands.add_parser("hub", help="run the hub, or manage its state")
    hub.add_argument("--listen", type=_host_port, default=("127.0.0.1", 8765))
    hub.add_argument("--protocol-version", default=CURRENT_TEXT, help=argparse.SUPPRESS)
    hub.add_argument("--state", help="directory for the hub's SQLite state (required)")
    _hub_limits(hub)
    _dsh_hub_options(hub)
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
    revoke = session_commands.add_parser(
        "revoke", help="revoke a session on a running hub (its agent gets 4428)"
    )
    revoke.add_argument("--hub", required=True, help="hub base URL")
    revoke.add_argument(
        "--token", default=None, help="client token (default: $TETHERBED_CLIENT_TOKEN)"
    )
    revoke.add_argument("session_id")
    wait = session_commands.add_parser(
        "wait", help="wait until an agent serves a session on a running hub (for scripts)"
    )
    wait.add_argument("--hub", required=True, help="hub base URL")
    wait.add_argument(
        "--token", default=None, help="client token (default: $TETHERBED_CLIENT_TOKEN)"
    )
    wait.add_argument("--timeout", type=_positive_float, default=30.0, help="seconds (30)")
    wait.add_argument("session_id")

    agent = commands.add_parser(
        "agent",
        help="run an agent (shim) that dials the hub",
        description="Without --session-id the agent runs in control mode: it opens the "
        "machine's control connection and starts a child agent per activated session.",
    )
    _dsh_agent_transport(agent)
    agent.add_argument("--hub", help="hub base URL, e.g. ws://127.0.0.1:8765 (required)")
    agent.add_argument(
        "--token", default=None, help="agent bearer token (default: $TETHERBED_AGENT_TOKEN)"
    )
    agent.add_argument("--root", help="the allowed root folder (data mode)")
    agent.add_argument("--session-id", help="serve this session directly (legacy data mode)")
    agent.add_argument(
        "--browse-root",
        action="append",
        default=[],
        help="control mode: a folder browsing starts from (repeatable; default: home)",
    )
    agent.add_argument("--state-dir", help="audit key and log (default: ~/.local/state/...)")
    agent.add_argument("--idle-exit", type=_positive_float, default=None, help=argparse.SUPPRESS)
    agent.add_argument(
        "--child-idle-exit",
        type=_positive_float,
        default=600.0,
        help="control mode: seconds without a request before a session child stops",
    )
    agent.add_argument("--enable-shell", action="store_true", help="allow EXECUTE_COMMAND")
    agent.add_argument("--machine-id", default="", help="defaults to hostname-uuid")
    agent.add_argument("--max-concurrent", type=_positive_int, default=None)
    agent.add_argument("--max-file-size", type=_positive_int, default=None)
    agent.add_argument("--command-timeout", type=_positive_float, default=None)
    agent.add_argument(
        "--serial-port",
        action="append",
        default=[],
        metavar="PATH=DESCRIPTION",
        help="advertise a serial port in HELLO (hardware_serial); repeatable",
    )
    agent.add_argument(
        "--usb-device",
        action="append",
        default=[],
        metavar="VID:PID=DESCRIPTION",
        help="advertise a USB device in HELLO (hardware_usb; no I/O); repeatable",
    )
    agent.add_argument(
        "--gpio-line",
        action="append",
        default=[],
        metavar="CHIP:LINE=DESCRIPTION",
        help="advertise a GPIO line, e.g. gpiochip0:17=LED (hardware_gpio; no I/O); repeatable",
    )
    agent.add_argument(
        "--no-serial-io",
        action="store_true",
        help="do not offer the serial I/O extension (tetherbed.serial_io) with --serial-port",
    )
    agent.add_argument(
        "--recycle-bin",
        default=None,
        metavar="DIR",
        help="FILE_DELETE moves entries into DIR (freedesktop.org Trash layout: files/ and "
        "info/NAME.trashinfo restore records) instead of unlinking them; outside --root",
    )
    agent.add_argument(
        "--ollama-url",
        default=None,
        metavar="URL",
        help="an Ollama-compatible backend, e.g. http://127.0.0.1:11434: its models are "
        "advertised as local_llm and LOCAL_LLM_COMPLETION is served by it",
    )
    agent.add_argument(
        "--ollama-model",
        action="append",
        default=[],
        metavar="NAME",
        help="advertise only this of the backend's models (repeatable; default: all)",
    )
    agent.add_argument(
        "--ollama-timeout",
        type=_positive_float,
        default=50.0,
        help="seconds to wait for the backend's next token, loading included (50)",
    )
    agent.add_argument(
        "--display",
        default=None,
        help="X display for computer use (default: $DISPLAY; '' turns computer use off)",
    )
    agent.add_argument(
        "--clipboard-read-own",
        action="store_true",
        help="let CLIPBOARD_READ return text the agent itself wrote in the last 30 s",
    )
    agent.add_argument("--journal", default=None, help="write agent events as JSONL here")
    agent.add_argument(
        "--strict-wire",
        action="store_true",
        help="strict profile: imitate the public reference shim, which drops without an answer "
        "any request with a field the spec does not name or a value of the wrong type "
        "(for testing platforms; the spec itself says every request gets a response)",
    )
    agent.add_argument("--protocol-version", default=CURRENT_TEXT, help=argparse.SUPPRESS)
    agent.add_argument(
        "--defect",
        action="append",
        default=[],
        choices=sorted(AGENT_DEFECTS),
        help="enable a deliberate bug, to prove a checker catches it (docs/scenarios.md)",
    )
    agent_commands = agent.add_subparsers(dest="agent_command")
    audit = agent_commands.add_parser("audit", help="the agent's audit log")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_commands.add_parser("verify", help="check the HMAC chain of an audit log")
    verify.add_argument("file")
    verify.add_argument("--state-dir", dest="verify_state_dir", default=None)
    verify.add_argument("--key-file", default=None)

    commands.add_parser(
        "demo",
        help="the shipped scenarios on sim, one on real processes (--full: all; --tour: a "
        "client tour)",
        add_help=False,
    )
    commands.add_parser("run", help="run scenarios on a backend and check them", add_help=False)
    commands.add_parser(
        "explore",
        help="generated histories (generate:, nemesis:) across seeds, checked, the first "
        "failure shrunk and exported as a scenario (docs/explore.md)",
        add_help=False,
    )
    commands.add_parser(
        "conform",
        help="the conformance suite: conform agent|hub|native against any implementation",
        add_help=False,
    )
    commands.add_parser(
        "native",
        help="the native automation adapter (crossdesk-automation/1 over stdio)",
        add_help=False,
    )
    commands.add_parser(
        "fuzz",
        help="property-based fuzzing of a running hub, agent or native adapter (docs/fuzzing.md)",
        add_help=False,
    )
    commands.add_parser(
        "llm-server",
        help="an Ollama-compatible LLM server with deterministic output (for the test bed)",
        add_help=False,
    )
    commands.add_parser(
        "proxy",
        help="the fault proxy (Toxiproxy-compatible HTTP API plus WebSocket-aware faults)",
        add_help=False,
    )
    commands.add_parser(
        "load",
        help="Locust load tests against a hub: relay, storm, takeover, video (docs/load.md)",
        add_help=False,
    )
    return parser


def _hub_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-file-size", type=_positive_int, default=None)
    parser.add_argument("--command-timeout", type=_positive_int, default=None)
    parser.add_argument("--max-concurrent", type=_positive_int, default=None)
    parser.add_argument("--ping-interval", type=_positive_float, default=None)
    parser.add_argument("--pong-timeout", type=_positive_float, default=None)
    parser.add_argument("--queue-limit", type=_positive_int, default=None)
    parser.add_argument(
        "--retry-window",
        type=_positive_float,
        default=None,
        help="seconds a dropped session stays reserved and its retryable requests held",
    )
    parser.add_argument(
        "--request-timeout",
        type=_positive_float,
        default=None,
        help="seconds to wait for an agent's answer (EXECUTE_COMMAND: its timeout plus "
        "--command-slack), and at most for a free slot; default 60",
    )
    parser.add_argument("--command-slack", type=_positive_float, default=None)
    parser.add_argument(
        "--overload-backoff",
        type=_positive_float,
        default=None,
        help="first delay before re-issuing a request the agent refused with "
        "SHIM_OVERLOADED; doubles each time (default 0.5 s, at most --overload-retries times)",
    )
    parser.add_argument("--overload-retries", type=int, default=None)
    parser.add_argument(
        "--handshake-timeout",
        type=_positive_float,
        default=None,
        help="seconds a connection may take to send its HTTP upgrade (default 10)",
    )
    parser.add_argument(
        "--slow-consumer-seconds",
        type=_positive_float,
        default=None,
        help="close a peer that accepts no byte this long while frames wait for it (default 20)",
    )
    parser.add_argument(
        "--slow-consumer-bytes",
        type=_positive_int,
        default=None,
        help="close a peer with this many bytes waiting for it (default 48 MiB)",
    )
    parser.add_argument(
        "--events", default=None, help="write hub events as JSONL here (for the simulator)"
    )
    parser.add_argument(
        "--defect",
        action="append",
        default=[],
        choices=sorted(HUB_DEFECTS),
        help="enable a deliberate bug, to prove a checker catches it (docs/scenarios.md)",
    )
    parser.add_argument(
        "--no-auto-restore",
        action="store_true",
        help="do not restore idle-stopped sessions through the control connection",
    )
    parser.add_argument(
        "--ownership",
        choices=[policy.value for policy in OwnershipPolicy],
        default=OwnershipPolicy.REFERENCE.value,
        help="how a second agent claiming a session is handled (docs/spec-notes.md)",
    )


def _leading_log_level(argv: list[str]) -> tuple[list[str], list[str]]:
    """`tetherbed --log-level X CMD ...`: the option, and the rest."""
    if argv[:1] == ["--log-level"] and len(argv) > 1:
        return argv[:2], argv[2:]
    if argv and argv[0].startswith("--log-level="):
        return ["--log-level", argv[0].split("=", 1)[1]], argv[1:]
    return [], argv


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    level, rest = _leading_log_level(argv)
    dsh_agent = _dsh_agent_argv(rest)
    if dsh_agent is not None:
        from tetherbed.agent.dsh.cli import main as dsh_agent_main

        return dsh_agent_main(dsh_agent)
    # These parse their own arguments (after the subcommand, the option is theirs).
    if rest[:1] == ["proxy"]:
        from tetherbed.simulator.proxy.cli import main as proxy_main

        return proxy_main([*level, *rest[1:]])
    if rest[:1] == ["load"]:
        from tetherbed.load.cli import main as load_main

        return load_main(rest[1:])
    if rest[:1] == ["llm-server"]:
        from tetherbed.simulator.peripherals.llm_server.server import main as llm_server_main

        return llm_server_main([*level, *rest[1:]])
    if rest[:1] == ["run"]:
        from tetherbed.simulator.cli import main as run_main

        return run_main([*level, *rest[1:]])
    if rest[:2] == ["native", "device"]:
        from tetherbed.agent.native.main import main_device

        return main_device(rest[2:])
    if rest[:2] == ["native", "doctor"]:
        from tetherbed.agent.native.doctor import main as doctor_main

        return doctor_main(rest[2:])
    if rest[:1] == ["explore"]:
        from tetherbed.simulator.explore.cli import main as explore_main

        return explore_main(rest[1:])
    if rest[:1] == ["conform"]:
        from tetherbed.simulator.conformance.cli import main as conform_main

        return conform_main(rest[1:])
    if rest[:1] == ["fuzz"]:
        from tetherbed.simulator.fuzz.cli import main as fuzz_main

        return fuzz_main(rest[1:])
    if rest[:1] == ["demo"]:
        from tetherbed.demo import main as demo_main

        return demo_main([*level, *rest[1:]])
    if rest[:1] == ["native"]:
        from tetherbed.agent.native.main import main as native_main

        return native_main([*level, *rest[1:]])
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
    raise AssertionError(args.command)


def _hub(args: argparse.Namespace) -> int:
    from tetherbed.hub.config import HubConfig
    from tetherbed.hub.store import HubStore

    if args.hub_command == "session" and args.session_command == "revoke":
        return _revoke(args)
    if args.hub_command == "session" and args.session_command == "wait":
        return _wait(args)
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
    from tetherbed.hub.server import CannotListen, serve

    config = HubConfig(
        ownership=OwnershipPolicy(args.ownership),
        auto_restore=not args.no_auto_restore,
        defects=frozenset(args.defect),
        protocol_version=args.protocol_version,
    )
    for option, field in TUNABLE_OPTIONS.items():
        value = getattr(args, option)
        if value is not None:
            setattr(config, field, value)
    try:
        config.dsh = _dsh_config(args)
        config.__post_init__()
    except ValueError as exc:
        print(f"tetherbed hub: {exc}", file=sys.stderr)
        return 2
    host, port = args.listen
    try:
        event_loop.run(serve(config, store, host, port, events=args.events))
    except CannotListen as exc:
        print(f"tetherbed hub: {exc}", file=sys.stderr)
        return 2
    return 0


def _revoke(args: argparse.Namespace) -> int:
    import os

    from tetherbed.client.admin import HubAdmin, HubError

    token = args.token or os.environ.get("TETHERBED_CLIENT_TOKEN")
    if not token:
        print("tetherbed hub session revoke: --token or $TETHERBED_CLIENT_TOKEN", file=sys.stderr)
        return 2

    async def revoke() -> dict:
        async with HubAdmin(args.hub, token) as admin:
            return await admin.revoke(args.session_id)

    try:
        result = asyncio.run(revoke())
    except HubError as exc:
        print(f"tetherbed hub session revoke: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    state = "its agent was closed with 4428" if result["agent_closed"] else "no agent connected"
    print(f"revoked {args.session_id}: {state}")
    return 0


def _wait(args: argparse.Namespace) -> int:
    import os

    from tetherbed.client.admin import HubAdmin, HubError

    token = args.token or os.environ.get("TETHERBED_CLIENT_TOKEN")
    if not token:
        print("tetherbed hub session wait: --token or $TETHERBED_CLIENT_TOKEN", file=sys.stderr)
        return 2

    async def wait() -> dict:
        async with HubAdmin(args.hub, token) as admin:
            return await admin.wait_connected(args.session_id, args.timeout)

    try:
        session = asyncio.run(wait())
    except TimeoutError as exc:
        print(f"tetherbed hub session wait: {exc}", file=sys.stderr)
        return 1
    except HubError as exc:
        print(f"tetherbed hub session wait: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    print(f"{args.session_id}: an agent is connected (machine {session.get('machine_id')})")
    return 0


def _agent(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    if args.agent_command == "audit":
        from tetherbed.agent.audit.verify import main as verify_main

        argv = [args.file]
        if args.verify_state_dir:
            argv += ["--state-dir", args.verify_state_dir]
        if args.key_file:
            argv += ["--key-file", args.key_file]
        return verify_main(argv)

    from tetherbed.agent.audit.log import AuditLogError
    from tetherbed.agent.config import AgentConfig, Limits, hub_url_problem
    from tetherbed.agent.runtime import AgentRuntime
    from tetherbed.runtime.websocket_transport import connect_websocket

    def usage(message: str) -> int:
        print(f"tetherbed agent: {message}", file=sys.stderr)
        return 2

    token = args.token or os.environ.get("TETHERBED_AGENT_TOKEN")
    if not args.hub:
        return usage("--hub URL is required")
    problem = hub_url_problem(args.hub)
    if problem:
        return usage(f"--hub {problem}")
    if not token:
        return usage("--token or $TETHERBED_AGENT_TOKEN is required")
    if args.session_id:
        if not args.root:
            return usage("--root DIR is required with --session-id")
        root = Path(args.root)
        if not root.is_dir():
            return usage(f"--root {args.root} is not a directory")
        root_text = str(root.resolve())
        if args.recycle_bin:
            bin_path = Path(args.recycle_bin).resolve()
            if bin_path == Path(root_text) or Path(root_text) in bin_path.parents:
                return usage(f"--recycle-bin {args.recycle_bin} must be outside --root")
    else:
        if args.root:
            return usage("--root applies to a session; use --browse-root in control mode")
        root_text = ""
    browse_roots: list[str] = []
    if not args.session_id:
        browse_roots = [str(Path(p).resolve()) for p in args.browse_root] or [str(Path.home())]
        missing = [p for p in browse_roots if not Path(p).is_dir()]
        if missing:
            return usage(f"--browse-root {missing[0]} is not a directory")
    # An empty value (`--serial-port=` from a template's empty placeholder) is none.
    serial_ports = []
    for item in filter(None, args.serial_port):
        path, sep, description = item.partition("=")
        if not path:
            return usage(f"--serial-port {item!r}: expected PATH=DESCRIPTION")
        serial_ports.append((path, description if sep else path))
    usb_devices = []
    for item in filter(None, args.usb_device):
        ids, sep, description = item.partition("=")
        vid, colon, pid = ids.partition(":")
        if not colon or not _hex4(vid) or not _hex4(pid):
            return usage(f"--usb-device {item!r}: expected VID:PID=DESCRIPTION (4 hex digits each)")
        usb_devices.append((vid.lower(), pid.lower(), description if sep else ids))
    gpio_lines = []
    for item in filter(None, args.gpio_line):
        line, sep, description = item.partition("=")
        if ":" not in line:
            return usage(f"--gpio-line {item!r}: expected CHIP:LINE=DESCRIPTION")
        gpio_lines.append((line, description if sep else line))
    if args.ollama_url and not args.ollama_url.startswith(("http://", "https://")):
        return usage(f"--ollama-url must be an http:// or https:// URL, got {args.ollama_url!r}")
    defaults = Limits()
    limits = Limits(
        max_file_size_bytes=args.max_file_size or defaults.max_file_size_bytes,
        command_timeout_seconds=args.command_timeout or defaults.command_timeout_seconds,
        max_concurrent=args.max_concurrent or defaults.max_concurrent,
    )
    config = AgentConfig(
        hub_url=args.hub,
        token=token,
        root=root_text,
        session_id=args.session_id,
        machine_id=args.machine_id,
        enable_shell=args.enable_shell,
        local_limits=limits,
        browse_roots=browse_roots,
        state_dir=args.state_dir,
        idle_exit=args.idle_exit,
        child_idle_exit=args.child_idle_exit,
        journal=args.journal,
        defects=frozenset(args.defect),
        protocol_version=args.protocol_version,
        serial_ports=serial_ports,
        usb_devices=usb_devices,
        gpio_lines=gpio_lines,
        serial_io=not args.no_serial_io,
        recycle_bin=args.recycle_bin,
        ollama_url=args.ollama_url or None,
        ollama_models=list(args.ollama_model),
        ollama_timeout=args.ollama_timeout,
        display=args.display,
        clipboard_read_own=args.clipboard_read_own,
        strict_wire=args.strict_wire,
    )

    async def run() -> int:
        try:
            runtime = AgentRuntime(config, connector=connect_websocket)
        except AuditLogError as exc:
            print(
                f"tetherbed agent: the audit log cannot be continued ({exc}); run "
                "`tetherbed agent audit verify` on it and move it aside",
                file=sys.stderr,
            )
            return 2
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: asyncio.ensure_future(runtime.shutdown()))
        try:
            stop = await runtime.run()
        finally:
            await runtime.close()
        if stop.exit_code:
            print(f"tetherbed agent: {stop.reason}", file=sys.stderr)
        return int(stop.exit_code)

    return event_loop.run(run())


# === dsh-computers (hub/dsh, agent/dsh) ==========================================


def _dsh_agent_transport(agent: argparse.ArgumentParser) -> None:
    agent.add_argument(
        "--transport",
        choices=["websocket", "sse"],
        default="websocket",
        help="websocket: the local-executor agent (the options below); sse: the "
        "dsh-computers agent, `tetherbed agent --transport sse {enroll,run,status,service}` "
        "(see `tetherbed agent --transport sse --help`)",
    )


def _dsh_agent_argv(argv: list[str]) -> list[str] | None:
    """The dsh agent's own arguments when argv is `agent --transport sse ...`."""
    if argv[:1] != ["agent"]:
        return None
    rest = argv[1:]
    for index, item in enumerate(rest):
        if item == "--transport" and index + 1 < len(rest):
            if rest[index + 1] != "sse":
                return None
            return rest[:index] + rest[index + 2 :]
        if item.startswith("--transport="):
            if item.partition("=")[2] != "sse":
                return None
            return rest[:index] + rest[index + 1 :]
    return None


def _dsh_hub_options(hub: argparse.ArgumentParser) -> None:
    from tetherbed.hub.dsh.config import DSH_HUB_DEFECTS

    group = hub.add_argument_group("dsh-computers (SSE agents, /api/dsh-computers)")
    group.add_argument(
        "--public-url",
        default="",
        help="the address machines reach this hub at, used in install commands "
        "(default: the address each request arrived on; never a request header)",
    )
    group.add_argument(
        "--dsh-role",
        choices=["hub", "runtime", "both"],
        default="both",
        help="serve machines (hub), be a machine of another hub (runtime), or both",
    )
    group.add_argument("--dsh-key-ttl-minutes", type=_positive_float, default=None)
    group.add_argument("--dsh-heartbeat-ms", type=_positive_int, default=None)
    group.add_argument("--dsh-exec-timeout-ms", type=_positive_int, default=None)
    group.add_argument(
        "--dsh-no-promote-on-timeout",
        action="store_true",
        help="cancel a foreground command at its timeout instead of making it a background job",
    )
    group.add_argument("--dsh-min-agent-version", default=None)
    group.add_argument("--dsh-exec-disabled", action="store_true", help="refuse computer_exec")
    group.add_argument(
        "--dsh-defect",
        action="append",
        default=[],
        choices=sorted(DSH_HUB_DEFECTS),
        help="enable a deliberate bug, to prove a conformance case catches it",
    )


def _dsh_config(args: argparse.Namespace) -> DshConfig:
    from tetherbed.hub.dsh.config import DshConfig

    config = DshConfig(
        public_url=args.public_url,
        role=args.dsh_role,
        promote_on_timeout=not args.dsh_no_promote_on_timeout,
        exec_enabled=not args.dsh_exec_disabled,
        state_dir=str(args.state),
        defects=frozenset(args.dsh_defect),
    )
    for option, field in [
        ("dsh_key_ttl_minutes", "key_ttl_minutes"),
        ("dsh_heartbeat_ms", "heartbeat_ms"),
        ("dsh_exec_timeout_ms", "exec_timeout_ms"),
        ("dsh_min_agent_version", "min_agent_version"),
    ]:
        value = getattr(args, option)
        if value is not None:
            setattr(config, field, value)
    return config


if __name__ == "__main__":
    raise SystemExit(main())
