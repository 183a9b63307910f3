"""`tetherbed conform SUITE [options] [-- CMD ARGS...]`: run a suite against a target.

    tetherbed conform agent -- my-shim --url {hub_url} --token {token} ...
    tetherbed conform hub --url wss://platform.example --tokens tokens.yaml
    tetherbed conform native -- crossdesk-cli agent --stdio --password-fd 3 --video-ws

Exit status: 0 when no MUST failed outside the --expect-fail list and no case
hit a test bed error (with --strict, no unknown either); 1 otherwise; 2 when
the command line or the target is unusable (nothing was judged).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tetherbed import __version__
from tetherbed.simulator.conformance import registry
from tetherbed.simulator.conformance.case import Case
from tetherbed.simulator.conformance.comparison import compare
from tetherbed.simulator.conformance.environment import TargetUnavailable
from tetherbed.simulator.conformance.expectations import ExpectationsError, read_expectations
from tetherbed.simulator.conformance.levels import Outcome
from tetherbed.simulator.conformance.profiles import ProfileError, ambiguities, parse_profile
from tetherbed.simulator.conformance.reports import table_lines, write_reports
from tetherbed.simulator.conformance.reports.junit import junit_xml
from tetherbed.simulator.conformance.reports.terminal import case_line
from tetherbed.simulator.conformance.results import RunResult
from tetherbed.simulator.conformance.runner import run_cases
from tetherbed.simulator.targets import TargetError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

log = logging.getLogger("tetherbed.conform")


def build_parser(suite: registry.Suite) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"tetherbed conform {suite.name}",
        description=f"{suite.description} ({suite.spec})",
        epilog="Everything after `--` is the target's command (a template: docs/conformance.md).",
    )
    parser.add_argument("--log-level", default="WARNING", help="default: WARNING")
    runs = parser.add_argument_group("selection and run")
    runs.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="AMBIGUITY=READING",
        help="the reading of a spec ambiguity to judge by (--list-profiles); repeatable",
    )
    runs.add_argument("--case", action="append", default=[], help="run only this case (repeat)")
    runs.add_argument("--family", action="append", default=[], help="run only this family")
    runs.add_argument("-k", dest="keyword", help="run only cases whose id contains this")
    runs.add_argument("--exclude", action="append", default=[], help="leave this case out (repeat)")
    runs.add_argument("--jobs", type=int, default=suite.concurrency, help="cases run at once")
    runs.add_argument("--list", action="store_true", help="list the cases and exit")
    runs.add_argument("--list-profiles", action="store_true", help="list the ambiguities")
    ci = parser.add_argument_group("CI")
    ci.add_argument("--report", type=Path, help="write conformance.json, junit.xml and HTML here")
    ci.add_argument("--json", type=Path, help="also write conformance.json to this file")
    ci.add_argument("--junit", type=Path, help="also write the JUnit XML to this file")
    ci.add_argument("--expect-fail", type=Path, help="known departures, one case id per line")
    ci.add_argument("--compare", type=Path, help="a previous conformance.json to compare with")
    ci.add_argument("--strict", action="store_true", help="an unknown verdict fails the run too")
    ci.add_argument("--no-colour", action="store_true")
    suite.add_arguments(parser.add_argument_group(f"the {suite.name} under test"))
    return parser


def usage() -> str:
    lines = ["usage: tetherbed conform SUITE [options] [-- CMD ARGS...]", "", "suites:"]
    for suite in registry.suites().values():
        lines.append(f"  {suite.name:12} {suite.description} ({suite.spec})")
    lines.append("")
    lines.append("`tetherbed conform SUITE --help` for a suite's options.")
    return "\n".join(lines)


def select(cases: list[Case], args: argparse.Namespace) -> list[Case]:
    chosen = cases
    if args.case:
        known = {c.id for c in cases}
        missing = sorted(set(args.case) - known)
        if missing:
            raise ValueError(f"no such case: {', '.join(missing)}")
        chosen = [c for c in chosen if c.id in args.case]
    if args.family:
        families = {c.family for c in cases}
        missing = sorted(set(args.family) - families)
        if missing:
            raise ValueError(f"no such family: {', '.join(missing)} (families: {sorted(families)})")
        chosen = [c for c in chosen if c.family in args.family]
    if args.keyword:
        chosen = [c for c in chosen if args.keyword in c.id]
    if args.exclude:
        missing = sorted(set(args.exclude) - {c.id for c in cases})
        if missing:
            raise ValueError(f"no such case: {', '.join(missing)}")
        chosen = [c for c in chosen if c.id not in args.exclude]
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    suites = registry.suites()
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return EXIT_OK if argv else EXIT_USAGE
    suite = suites.get(argv[0])
    if suite is None:
        print(f"tetherbed conform: no suite {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return EXIT_USAGE
    options, command = _split(argv[1:])
    args = build_parser(suite).parse_args(options)
    args.command = command
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    def fail(message: str) -> int:
        print(f"tetherbed conform {suite.name}: {message}", file=sys.stderr)
        return EXIT_USAGE

    try:
        profile = parse_profile(args.profile, suite.name)
        chosen = select(registry.cases(suite.name), args)
    except (ProfileError, ValueError) as exc:
        return fail(str(exc))
    if args.list_profiles:
        for ambiguity in ambiguities(suite.name):
            print(f"{ambiguity.name} (default {ambiguity.default}): {ambiguity.question}")
            for reading, meaning in ambiguity.readings.items():
                print(f"    {reading:16} {meaning}")
        return EXIT_OK
    if args.list:
        for found in chosen:
            print(f"{found.id:40} {found.level!s:6} {found.section}")
        return EXIT_OK
    try:
        expected = (
            read_expectations(args.expect_fail, registry.case_ids()) if args.expect_fail else set()
        )
        previous = _read_previous(args.compare) if args.compare else None
        environment = suite.environment(args)
    except (ExpectationsError, TargetError, ValueError) as exc:
        return fail(str(exc))
    colour = sys.stdout.isatty() and not args.no_colour
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    print(f"conformance {suite.name}: {len(chosen)} cases against {environment.description}")

    def progress(result: object) -> None:
        if sys.stderr.isatty():
            print(case_line(result, colour=colour), file=sys.stderr)  # type: ignore[arg-type]

    clock = time.monotonic()
    try:
        results = asyncio.run(_run(environment, chosen, profile, args.jobs, progress))
    except (TargetUnavailable, TargetError) as exc:
        return fail(f"the target could not be brought up: {exc}")
    for result in results:
        result.expected_failure = result.id in expected
    run = RunResult(
        suite=suite.name,
        spec=suite.spec,
        target=environment.description,
        details=dict(environment.details),
        profile=profile.to_dict(),
        started=started,
        duration=time.monotonic() - clock,
        results=results,
        tetherbed_version=__version__,
        unmatched_expectations=sorted(expected - {r.id for r in results}),
    )
    if previous is not None:
        run.comparison = compare(run, previous)
    for line in table_lines(run, colour=colour):
        print(line)
    if args.report:
        folder = write_reports(run, args.report)
        print(f"report: {folder / 'index.html'} (all runs: {args.report / 'index.html'})")
    if args.json:
        args.json.write_text(json.dumps(run.to_dict(), indent=1) + "\n", encoding="utf-8")
    if args.junit:
        args.junit.write_bytes(junit_xml(run))
    return exit_status(run, strict=args.strict)


def exit_status(run: RunResult, *, strict: bool = False) -> int:
    if run.unexpected_failures() or run.errors():
        return EXIT_FAILED
    if strict and run.counts()[Outcome.UNKNOWN]:
        return EXIT_FAILED
    return EXIT_OK


async def _run(environment, cases, profile, jobs, progress):  # type: ignore[no-untyped-def]
    await environment.start()
    try:
        return await run_cases(environment, cases, profile, jobs=jobs, on_result=progress)
    finally:
        await environment.stop()


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        index = argv.index("--")
        return argv[:index], argv[index + 1 :]
    return argv, []


def _read_previous(path: Path) -> RunResult:
    try:
        return RunResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ValueError(f"cannot read --compare {path}: {exc}") from None
    except (ValueError, KeyError) as exc:
        raise ValueError(f"--compare {path}: {exc}") from None
