"""`tetherbed native`: the crossdesk-automation/1 adapter process, and its device registry.

    tetherbed native --stdio --password-fd 3 [--video-ws] [--server HOST --port PORT]
                     [--quality high-frame-rate|high|balanced|low] [--log-dir DIR]
    tetherbed native device add --display :N [--registry FILE]
    tetherbed native doctor [--json] [--display :N]        (doctor.py)

Only protocol responses use the original stdout: it is duplicated at start-up and
descriptor 1 is pointed at stderr, so any stray print or library chatter lands in
diagnostics. `--server/--port` are accepted and reported in `status`; the test bed
reaches its devices (X displays on this host) locally, not through a rendezvous
server. The device registry is `$TETHERBED_DEVICE_REGISTRY`, else
`~/.config/tetherbed/devices.json` (see devices.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from tetherbed.agent.native.planted_defects import NATIVE_DEFECTS
from tetherbed.agent.native.quality import DEFAULT, PRESETS

EXIT_USAGE = 2


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("a port is 1-65535")
    return value


def _fd(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("a descriptor is nonnegative")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tetherbed native", description="crossdesk-automation/1 native adapter"
    )
    parser.add_argument("--stdio", action="store_true", help="speak JSON lines on stdin/stdout")
    parser.add_argument("--password-fd", type=_fd, default=3, help="credential descriptor")
    parser.add_argument("--video-ws", action="store_true", help="loopback WebSocket video")
    parser.add_argument("--server", help="rendezvous host (reported; devices are local)")
    parser.add_argument("--port", type=_port, help="rendezvous port (reported)")
    parser.add_argument("--quality", choices=sorted(PRESETS), default=DEFAULT)
    parser.add_argument("--log-dir", help="existing directory for the adapter's log file")
    parser.add_argument(
        "--defect",
        action="append",
        default=[],
        choices=sorted(NATIVE_DEFECTS),
        help="enable a deliberate bug, to prove a conformance case catches it",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="what reaches stderr (the log file gets INFO and up)",
    )
    return parser


def _logging(log_dir: str | None, level: str = "WARNING") -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    handlers[0].setLevel(level)
    if log_dir is not None:
        path = os.path.join(log_dir, f"native-{os.getpid()}.log")
        file_handler = logging.FileHandler(path, encoding="utf-8")
        file_handler.setLevel(logging.INFO)
        handlers.append(file_handler)
    logging.basicConfig(
        level=min(logging.getLevelName(level), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.stdio:
        print("tetherbed native: --stdio is required", file=sys.stderr)
        return EXIT_USAGE
    if args.log_dir is not None and not os.path.isdir(args.log_dir):
        print(f"tetherbed native: --log-dir {args.log_dir} does not exist", file=sys.stderr)
        return EXIT_USAGE
    if args.video_ws:
        from tetherbed.agent.native.doctor import video_capabilities

        if not video_capabilities():
            print(
                "tetherbed native: --video-ws, but no video protocol works here "
                "(see `tetherbed native doctor`)",
                file=sys.stderr,
            )
            return EXIT_USAGE
    # Keep the real stdout for protocol responses only; fd 1 becomes stderr.
    out_fd = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    _logging(args.log_dir, args.log_level)

    from tetherbed.agent.native.adapter import Options
    from tetherbed.agent.native.devices import default_registry_path
    from tetherbed.agent.native.stdio import serve
    from tetherbed.runtime import event_loop

    options = Options(
        video_ws=args.video_ws,
        server=args.server,
        port=args.port,
        quality=args.quality,
        registry=str(default_registry_path()),
        defects=frozenset(args.defect),
    )
    try:
        return event_loop.run(serve(options, in_fd=0, out_fd=out_fd, password_fd=args.password_fd))
    finally:
        try:
            os.close(out_fd)
        except OSError:
            pass


def main_device(argv: Sequence[str] | None = None) -> int:
    """`tetherbed native device add --display :N [--registry FILE]`: prints id and password."""
    from tetherbed.agent.native.devices import register_device

    parser = argparse.ArgumentParser(prog="tetherbed native device")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="register an X display as a device")
    add.add_argument("--display", required=True, help="X display name, :N")
    add.add_argument("--registry", help="registry file (default: $TETHERBED_DEVICE_REGISTRY)")
    args = parser.parse_args(argv)
    device_id, password = register_device(args.registry, args.display)
    print(json.dumps({"device": device_id, "password": password, "display": args.display}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
