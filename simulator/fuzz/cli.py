"""`tetherbed fuzz hub|agent|native`: property-based fuzzing of a running target.

    tetherbed fuzz hub [--target ws://HOST:PORT | --target target.yaml | --target 'CMD {port}']
    tetherbed fuzz agent [--target 'my-shim --url {hub_url} --token {token} ...']
    tetherbed fuzz native [--target 'crossdesk-cli agent --stdio --password-fd 3 --video-ws']
        [--examples N] [--seed N] [--report DIR] [--replay CASE]

Without --target, Tetherbed's own hub, agent or native adapter is fuzzed. Exit
status: 0 when every property held (or a replayed case no longer fails), 1 when a
failure was found (written to --report as a replayable case), 2 when the command
line or the target is unusable.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tetherbed.simulator.fuzz.live.case import CaseError, FuzzCase
from tetherbed.simulator.fuzz.live.profile import PROFILE_VARIABLE, PROFILES, current
from tetherbed.simulator.fuzz.live.runner import FuzzResult, LiveTarget, fuzz, replay

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TARGETS = ("hub", "agent", "native")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tetherbed fuzz",
        description=__doc__.split("\n\n", 1)[0],
        epilog="docs/fuzzing.md: what is sent, what is judged, how to read a case.",
    )
    parser.add_argument("kind", choices=TARGETS, help="what to fuzz")
    parser.add_argument(
        "--target",
        help="hub: a ws:// URL, a target file (docs/targets.md) or the command that starts it; "
        "agent: its command template; native: the adapter's command",
    )
    parser.add_argument("--examples", type=int, help="sequences to generate (profile's default)")
    parser.add_argument("--seed", type=int, help="Hypothesis seed (default: a random one, printed)")
    parser.add_argument("--report", type=Path, help="write fuzz-KIND.json and failing cases here")
    parser.add_argument("--replay", type=Path, help="send a written case again instead of fuzzing")
    parser.add_argument(
        "--profile", choices=sorted(PROFILES), help=f"ci or long (default: ${PROFILE_VARIABLE})"
    )
    own = parser.add_argument_group("Tetherbed's own target")
    own.add_argument(
        "--defect", action="append", default=[], help="a planted defect to enable (repeatable)"
    )
    hub = parser.add_argument_group("a hub")
    hub.add_argument("--tokens", type=Path, help="the hub's tokens file (YAML or JSON)")
    hub.add_argument("--client-adapter", help="MODULE:CLASS for the hub's client API")
    native = parser.add_argument_group("a native adapter")
    native.add_argument("--password-file", type=Path, help="the password sent on descriptor 3")
    native.add_argument(
        "--codes",
        choices=("tetherbed", "any"),
        default="tetherbed",
        help="judge error codes by Tetherbed's reading (default) or only their three fields",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        profile = current(args.profile)
        target = _target(args, profile)
    except (ValueError, CaseError) as exc:
        print(f"tetherbed fuzz {args.kind}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    case = None
    if args.replay is not None:
        try:
            case = FuzzCase.read(args.replay)
        except CaseError as exc:
            print(f"tetherbed fuzz {args.kind}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        target.start()
    except Exception as exc:
        print(
            f"tetherbed fuzz {args.kind}: the target could not be started: {exc}", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        if case is not None:
            return _replay(target, case)
        seed = args.seed if args.seed is not None else random.randrange(2**32)
        examples = args.examples or profile.examples
        print(f"fuzz {args.kind}: {examples} examples, seed {seed}, against {target.description}")
        result = fuzz(
            target,
            examples=examples,
            seed_value=seed,
            profile=profile,
            report=args.report,
            progress=lambda line: print(line, file=sys.stderr),
        )
    finally:
        target.stop()
    return _print(result)


def _print(result: FuzzResult) -> int:
    print(result.summary())
    for case, path in zip(result.failures, result.case_paths or [None] * 9, strict=False):
        for problem in case.problems:
            print(f"  {problem}")
        print(f"  sent ({len(case.steps)} step(s)):")
        for step in case.steps:
            print(f"    {json.dumps(step)[:300]}")
        if path is not None:
            print(f"  case: {path} (replay: tetherbed fuzz {result.target} --replay {path})")
    return EXIT_FAILED if result.failures else EXIT_OK


def _replay(target: LiveTarget, case: FuzzCase) -> int:
    problems = replay(target, case)
    if problems:
        print(f"replay: the case still fails against {target.description}:")
        for problem in problems:
            print(f"  {problem}")
        return EXIT_FAILED
    print(f"replay: the case passes against {target.description}")
    return EXIT_OK


def _target(args: argparse.Namespace, profile: Any) -> LiveTarget:
    if args.kind == "native":
        return _native(args, profile)
    if args.kind == "hub":
        return _hub(args, profile)
    return _agent(args, profile)


def _native(args: argparse.Namespace, profile: Any) -> LiveTarget:
    from tetherbed.simulator.conformance.native.environment import REFERENCE, read_password
    from tetherbed.simulator.fuzz.live.native import NativeFuzzTarget

    if args.target and args.defect:
        raise ValueError("--defect is for Tetherbed's own adapter")
    argv = shlex.split(args.target) if args.target else [*REFERENCE]
    for defect in args.defect:
        argv += ["--defect", defect]
    password = read_password(args.password_file) if args.password_file else None
    description = None if args.target else "Tetherbed's native adapter"
    if description and args.defect:
        description += f" (--defect {' '.join(args.defect)})"
    return NativeFuzzTarget(
        argv, profile=profile, password=password, codes=args.codes, description=description
    )


def _hub(args: argparse.Namespace, profile: Any) -> LiveTarget:
    from tetherbed.simulator.fuzz.live.hub import HubFuzzTarget
    from tetherbed.simulator.targets import Target, TargetError

    spec = args.target
    try:
        is_file = bool(spec) and Path(spec).is_file()
        target = Target.read(Path(spec)) if is_file else Target.reference()
        url = spec if spec and spec.startswith(("ws://", "wss://")) else None
        if spec and not is_file and spec.endswith((".yaml", ".yml", ".json")):
            raise ValueError(f"no target file {spec}")
        command = spec if spec and not url and not is_file else None
        target = target.with_options(
            # A command's hub listens where {host} and {port} say (docs/targets.md).
            hub_url=url or ("ws://{host}:{port}" if command else None),
            hub_command=command,
            hub_tokens=args.tokens,
            client_adapter=args.client_adapter,
        )
    except TargetError as exc:
        raise ValueError(str(exc)) from None
    if args.defect and not target.hub.is_reference:
        raise ValueError("--defect is for Tetherbed's own hub")
    flags = [f for defect in args.defect for f in ("--defect", defect)]
    return HubFuzzTarget(target, profile=profile, reference_args=flags)


def _agent(args: argparse.Namespace, profile: Any) -> LiveTarget:
    from tetherbed.simulator.fuzz.live.agent import AgentFuzzTarget
    from tetherbed.simulator.targets import AgentTarget, TargetError

    try:
        agent = AgentTarget.from_command(args.target) if args.target else AgentTarget.reference()
    except TargetError as exc:
        raise ValueError(str(exc)) from None
    if args.defect and args.target:
        raise ValueError("--defect is for Tetherbed's own agent")
    return AgentFuzzTarget(agent, profile=profile, defects=list(args.defect))
