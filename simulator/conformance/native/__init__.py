"""The native suite: any `crossdesk-automation/1` adapter, driven over its stdio and video.

    tetherbed conform native [--device ID --password-file FILE] -- CMD ARGS...

Tetherbed plays the trusted parent (JSON lines, the password on descriptor
3) and the browser viewer (the loopback WebSocket). Without a command,
Tetherbed's own adapter is the target, connected to a private Xvfb display.
Every module of this package is a family of cases.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.registry import Suite, register_suite


def add_arguments(group: Any) -> None:
    group.add_argument("--device", help="the 9-digit device the adapter connects to")
    group.add_argument("--password-file", type=Path, help="its password (first line)")
    group.add_argument("--display-index", type=int, default=0, help="the device's display")
    group.add_argument(
        "--doctor-command",
        help='the adapter\'s `doctor --json` command (e.g. "crossdesk-cli doctor --json"); '
        "Tetherbed's own by default with its own adapter, else the doctor cases are skipped",
    )


def environment(args: argparse.Namespace) -> Any:
    from tetherbed.simulator.conformance.native.environment import (
        REFERENCE,
        REFERENCE_DOCTOR,
        NativeEnvironment,
        read_password,
    )
    from tetherbed.simulator.targets.templates import parse_command

    argv = list(args.command) or list(REFERENCE)
    if bool(args.device) != bool(args.password_file):
        raise ValueError("--device and --password-file go together")
    if args.command and not args.device and not _is_reference(argv):
        raise ValueError("an adapter of your own needs --device and --password-file")
    password = read_password(args.password_file) if args.password_file else None
    if args.doctor_command:
        doctor: list[str] | None = list(parse_command(args.doctor_command, "--doctor-command"))
    else:
        doctor = list(REFERENCE_DOCTOR) if _is_reference(argv) else None
    return NativeEnvironment(
        argv,
        device=args.device,
        password=password,
        display_index=args.display_index,
        reference=argv == list(REFERENCE),
        doctor=doctor,
    )


def _is_reference(argv: list[str]) -> bool:
    return "tetherbed" in " ".join(argv[:4]) and "native" in argv


SUITE = register_suite(
    Suite(
        name="native",
        prefix="CD",
        spec="CrossDesk native automation protocol, crossdesk-automation/1",
        description="a native automation adapter (JSON lines on stdio, loopback video)",
        add_arguments=add_arguments,
        environment=environment,
        concurrency=3,
    )
)
