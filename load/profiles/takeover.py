"""takeover: owners replaced by their own machine and challenged by others, under load.

`--sessions S` owners (load agents) serve through the recorder and wake up as
the same machine on a new connection every `--takeover-every` seconds;
`--challengers C` other machines claim random sessions every
`--challenge-every` seconds; `--users N` clients send the request mix to the
sessions meanwhile and record their legs. Afterwards the recorder's records
and the clients' legs are merged into one history and judged by the
simulator's checkers: every request answered exactly once (none lost, none
answered twice), no non-idempotent request executed twice, never two owners
of one session at once, no answer crossed to another client.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from typing import Any

from tetherbed.load.analysis.recording import merged_history, read_records
from tetherbed.load.analysis.timeline import figures, select
from tetherbed.load.plan import Stage
from tetherbed.load.profiles.context import Context, fail, run_profile
from tetherbed.load.run import (
    Report,
    finish,
    generator_lines,
    request_table,
    run_locust,
    standard_metrics,
)
from tetherbed.simulator.checkers import Verdict, run_checkers
from tetherbed.simulator.history import History

DEFAULT_DURATION = 20.0
#: The checkers the recording is judged by.
CHECKERS = ("exactly_one_answer", "no_double_execution", "single_owner", "no_crossed_answers")
#: Reported, and fatal only through --fail-if 'owner_overlaps>0' (docs/load.md).
OWNERSHIP = "single_owner"


def run(args: argparse.Namespace) -> int:
    return run_profile(args, _run)


def _run(ctx: Context) -> int:
    args = ctx.args
    topology = ctx.topology
    if ctx.distribution.expect_workers:
        return fail(
            "takeover is judged from the clients' legs, written where the workers run: "
            "run it with --workers on one machine"
        )
    access = topology.start_hub()
    recorder = topology.start_recorder()
    legs = ctx.folder / "legs"
    duration = args.duration or DEFAULT_DURATION
    users = args.sessions + args.challengers + args.users
    plan = ctx.plan(
        "takeover",
        access,
        agent_url=recorder.url,
        client_url=topology.client_url(access),
        load_agents=args.sessions,
        clients=args.users,
        root=str(topology.prepare_root(args.answer_bytes)),
        mix=args.mix_weights,
        answer_bytes=args.answer_bytes,
        service_seconds=args.service_ms / 1000.0,
        in_flight=args.in_flight,
        rate_per_client=args.rate / args.users if args.rate else None,
        max_outstanding=args.max_outstanding,
        request_timeout=args.request_timeout,
        takeover_every=args.takeover_every,
        challenge_every=args.challenge_every,
        challengers=args.challengers,
        legs_dir=str(legs),
        stages=[Stage("takeovers", users, duration)],
        spawn_rate=args.spawn_rate or max(users, 10),
    )
    result = run_locust(plan, ctx.folder / "locust", ctx.distribution, topology)
    wire = read_records(recorder.records)
    t0 = result.windows[0].start if result.windows else 0.0
    history = merged_history(wire, legs, t0)
    history.write(ctx.folder / "history.jsonl")
    verdicts = run_checkers(history, CHECKERS)

    report = Report("takeover", ctx.folder)
    report.add(
        f"tetherbed load takeover: {ctx.describe_target()}; {args.sessions} session(s) whose "
        f"owner wakes up every ~{args.takeover_every:g} s, {args.challengers} challenger(s) "
        f"every ~{args.challenge_every:g} s, {args.users} client(s), mix {args.mix}"
    )
    report.add("")
    report.lines += request_table(result, ["ws", "agent", "client"])
    report.add("")
    requests = figures(select(result.rows, types=["ws"]))
    report.metrics.update(standard_metrics(requests))
    takeovers = figures(select(result.rows, types=["agent"], names=["takeover"]))
    window = result.windows[0].seconds if result.windows else duration
    rate = (takeovers.requests - takeovers.failures) / window if window else 0.0
    report.metrics["takeovers_per_s"] = rate
    served = _owners_from_wire(wire)
    report.add(
        f"takeovers: {takeovers.requests - takeovers.failures} in {window:.1f} s = {rate:.2f}/s "
        f"(new connection to its HELLO_ACK: p50 {takeovers.p50_ms:.3g} ms, p99 "
        f"{takeovers.p99_ms:.3g} ms); on the wire, {served} owner changes"
    )
    lost, twice = _lost_and_twice(history)
    report.metrics["lost"] = float(lost)
    report.metrics["twice"] = float(twice)
    report.add(
        f"judged from the recording ({len(history):,} records: the recorder's and the "
        f"clients' legs): {lost} request(s) lost, {twice} answered twice"
    )
    for verdict in verdicts:
        report.add(f"  {verdict.status.upper():<8}{verdict.name}: {verdict.summary}")
        if verdict.name == OWNERSHIP:
            overlaps = _violations(verdict)
            report.metrics["owner_overlaps"] = float(overlaps)
            if verdict.status == "fail":
                report.add(
                    f"  (a finding, not counted against the run: {overlaps} takeover(s) where the "
                    "old connection still answered requests it got before SESSION_REVOKED while "
                    "the new one already served; --fail-if 'owner_overlaps>0' makes it fatal)"
                )
                continue
        if verdict.status != "pass":  # no evidence is unknown, never a pass
            report.problems.append(f"{verdict.name}: {verdict.summary}")
    report.figures["verdicts"] = {
        v.name: {"status": v.status, "summary": v.summary} for v in verdicts
    }
    report.figures["takeovers_per_s"] = rate
    report.figures["lost"] = lost
    report.figures["twice"] = twice
    report.lines += generator_lines(result, ctx.workers, None, requests.rps)
    if result.hub is not None:
        report.add("hub (its own /metrics):")
        report.lines += [f"  {line}" for line in result.hub.lines()]
    return finish(report, result, ctx.conditions, as_json=args.json)


def _owners_from_wire(wire: list[dict[str, Any]]) -> int:
    """Connections that became a session's owner after its first one (HELLO_ACK down)."""
    served: Counter[str] = Counter()
    for record in wire:
        if (
            record.get("event") == "frame"
            and record.get("type") == "HELLO_ACK"
            and record.get("dir") == "down"
            and isinstance(record.get("session"), str)
        ):
            served[record["session"]] += 1
    return sum(max(n - 1, 0) for n in served.values())


def _violations(verdict: Verdict) -> int:
    """How many violations a verdict found (its summary counts past the evidence cap)."""
    match = re.match(r"(\d+) violation", verdict.summary)
    if match:
        return int(match[1])
    return len({e.get("violation") for e in verdict.evidence})


def _lost_and_twice(history: History) -> tuple[int, int]:
    """Requests with no answer, and requests answered more than once, from the legs."""
    invoked: set[tuple[str, str]] = set()
    answers: Counter[tuple[str, str]] = Counter()
    for record in history:
        if record.req is None:
            continue
        slot = (record.process, record.req)
        if record.type == "invoke":
            invoked.add(slot)
        elif record.type in ("ok", "fail", "info"):
            answers[slot] += 1
    lost = sum(1 for slot in invoked if answers[slot] == 0)
    twice = sum(1 for n in answers.values() if n > 1)
    return lost, twice
