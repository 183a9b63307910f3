"""The agent's command line (§6): enroll, run, status, service, --version.

Two ways in, one implementation: `tetherbed agent --transport sse <command>`
and `python3 agent.pyz <command>` (the file join.sh installs). `program` says
which, so that `service install` starts the agent the same way again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import logging.handlers
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tetherbed.agent.dsh import config as agent_config
from tetherbed.agent.dsh import enrollment
from tetherbed.agent.dsh.core import AGENT_DEFECTS
from tetherbed.agent.dsh.runner import AgentRunner, RuntimeOptions
from tetherbed.agent.dsh.service import Service, ServiceError
from tetherbed.agent.dsh.transport import TransportError
from tetherbed.agent.dsh.version import AGENT_VERSION
from tetherbed.wire.dsh import constants as C

CAPABILITIES = enrollment.CAPABILITIES


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Tetherbed's dsh-computers agent: dials out to a hub over SSE and runs "
        "its commands and file operations on this machine.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {AGENT_VERSION}")
    parser.add_argument(
        "--home",
        default=None,
        help=f"config folder (default: ${C.AGENT_HOME_ENV} or ~/{C.AGENT_HOME_DIR})",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    enroll = commands.add_parser("enroll", help="join a hub with an enrollment key")
    enroll.add_argument("--server", required=True, help="the hub's URL, e.g. https://hub:8765")
    enroll.add_argument("--key", required=True, help="the enrollment key (dshc_...)")
    enroll.add_argument("--name", default=None, help="display name (default: the hostname)")
    enroll.add_argument(
        "--replace", action="store_true", help="replace this computer's saved connection"
    )
    run = commands.add_parser("run", help="connect and serve commands in the foreground")
    run.add_argument("--log-file", default=None, help="also log here (rotated at 5 MiB)")
    run.add_argument("--workspace", default=None, help="default cwd (default: home)")
    run.add_argument(
        "--chunk-format",
        choices=["split", "typed"],
        default="split",
        help="streamed chunks as §11.2 {stdout, stderr} (split) or §11.6.2 {type, data}",
    )
    run.add_argument(
        "--defect",
        action="append",
        default=[],
        choices=sorted(AGENT_DEFECTS),
        help="enable a deliberate bug, to prove a checker catches it",
    )
    commands.add_parser("status", help="print the config (token redacted) and the service")
    service = commands.add_parser("service", help="the background service")
    service.add_argument(
        "action", choices=["install", "uninstall", "start", "stop", "restart", "status"]
    )
    return parser


def main(argv: Sequence[str] | None = None, *, program: list[str] | None = None) -> int:
    program = program or [sys.executable, "-m", "tetherbed", "agent", "--transport", "sse"]
    prog = Path(program[-1]).name if len(program) == 2 else "tetherbed agent --transport sse"
    args = build_parser(prog).parse_args(list(sys.argv[1:] if argv is None else argv))
    home = Path(args.home) if args.home else agent_config.agent_home()
    if args.command == "enroll":
        return asyncio.run(_enroll(args, home))
    if args.command == "run":
        return _run(args, home)
    if args.command == "status":
        return _status(home, program)
    return _service(args.action, home, program)


def _say(text: str) -> None:
    print(text, flush=True)


def _fail(text: str) -> int:
    print(f"✗ {text}", file=sys.stderr, flush=True)
    return 1


# --- enroll ----------------------------------------------------------------------


async def _enroll(args: argparse.Namespace, home: Path) -> int:
    path = agent_config.config_path(home)
    if path.exists() and not args.replace:
        try:
            saved = agent_config.load(path)
            where = f"{saved['serverUrl']} as {saved.get('name') or saved['computerId']}"
        except agent_config.ConfigError:
            where = "a hub"
        return _fail(
            f"this computer is already connected to {where}. To replace that connection, "
            "turn on “Replace this computer's saved connection” in the connect dialog and "
            "copy the command again (or add --replace)."
        )
    server = args.server.rstrip("/")
    try:
        enrolled = await enrollment.enroll(server, args.key, args.name)
    except ValueError as exc:
        return _fail(str(exc))
    except TransportError as exc:
        return _fail(f"cannot reach {server}: {exc}")
    except enrollment.EnrollRefused as exc:
        return _fail(f"{server} refused the key: {exc.message}")
    record = {
        "version": C.RECORD_VERSION,
        "serverUrl": server,
        "computerId": enrolled.computer_id,
        "token": enrolled.token,
        "name": enrolled.name,
        "enrolledAt": _now_iso(),
    }
    agent_config.write_private_json(path, record)
    problem = await enrollment.probe(server, enrolled.token)
    if problem:
        return _fail(f"enrolled as {enrolled.name}, but the stream did not open: {problem}")
    _say(f"✓ connected to {server}; this computer is now {enrolled.name}")
    return 0


def _now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


# --- run -------------------------------------------------------------------------


def _run(args: argparse.Namespace, home: Path) -> int:
    path = agent_config.config_path(home)
    try:
        saved = agent_config.load(path)
    except agent_config.ConfigError as exc:
        return _fail(str(exc))
    _setup_logging(args.log_file)
    log = logging.getLogger("tetherbed.agent.dsh")

    def rename(name: str) -> None:
        try:
            current = agent_config.load(path)
        except agent_config.ConfigError:
            return
        current["name"] = name
        agent_config.write_private_json(path, current)

    options = RuntimeOptions(
        server_url=saved["serverUrl"],
        token=saved["token"],
        computer_id=saved["computerId"],
        name=saved.get("name") or "",
        workspace_base=args.workspace or str(Path.home()),
        capabilities=CAPABILITIES,
        chunk_format=args.chunk_format,
        defects=frozenset(args.defect),
        on_rename=rename,
    )

    async def serve() -> int:
        runner = AgentRunner(options)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, runner.stop)
        log.info("starting: %s as %s (%s)", saved["serverUrl"], options.name, AGENT_VERSION)
        code = await runner.run()
        log.info("stopped (exit %s)", code)
        return code

    return asyncio.run(serve())


def _setup_logging(log_file: str | None) -> None:
    root = logging.getLogger("tetherbed.agent.dsh")
    root.setLevel(logging.INFO)
    root.propagate = False
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                log_file, maxBytes=C.AGENT_LOG_ROTATE_BYTES, backupCount=1, encoding="utf-8"
            )
        )
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)


# --- status and service ----------------------------------------------------------


def _status(home: Path, program: list[str]) -> int:
    path = agent_config.config_path(home)
    try:
        shown: dict[str, Any] = agent_config.redacted(agent_config.load(path))
    except agent_config.ConfigError as exc:
        _say(f"not enrolled ({exc})")
        _say(Service(home, program).status())
        return 1
    _say(f"config: {path}")
    _say(json.dumps(shown, indent=2))
    _say(Service(home, program).status())
    return 0


def _service(action: str, home: Path, program: list[str]) -> int:
    service = Service(home, program)
    try:
        if action == "install":
            agent_config.load(agent_config.config_path(home))
            mode = service.install()
            _say(f"✓ installed ({mode})")
        elif action == "uninstall":
            service.uninstall()
            _say("✓ uninstalled")
        elif action == "start":
            _say(f"✓ {service.start()}")
        elif action == "stop":
            _say(service.stop())
        elif action == "restart":
            _say(f"✓ {service.restart()}")
        else:
            _say(service.status())
    except (ServiceError, agent_config.ConfigError) as exc:
        _fail(str(exc))
        _say(f"run it yourself instead: {service.manual_command()}")
        return 1
    return 0
