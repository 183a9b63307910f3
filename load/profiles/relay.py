"""relay: how many requests the hub relays, at what latency, and where it bends.

Load agents (and, with `--real-agents`, agent processes) serve sessions;
clients send the request mix through the hub, closed or open loop. With
`--step` the clients come in steps and the knee is the highest rate whose
p99 stays under `--p99-bound`. Before and after the run, the same clients run for
`--echo-seconds` in one Locust process against a raw `websockets` echo: the
generator's own ceiling, so the summary can say whether the hub or the
generator limited the run.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from tetherbed.load.analysis.timeline import Figures, Window, figures, select
from tetherbed.load.locust_process import Distribution
from tetherbed.load.plan import Plan, Stage
from tetherbed.load.profiles.context import Context, fail, run_profile
from tetherbed.load.run import (
    Report,
    finish,
    generator_lines,
    request_table,
    run_locust,
    standard_metrics,
)

#: The first seconds of a step are its ramp: left out of the step's figures.
SETTLE_SECONDS = 2.0
ECHO_SETTLE_SECONDS = 1.0
DEFAULT_DURATION = 20.0


@dataclass(frozen=True, slots=True)
class StepFigures:
    window: Window
    clients: int
    found: Figures

    def within(self, bound_ms: float) -> bool:
        return (
            self.found.requests > 0
            and self.found.failures == 0
            and math.isfinite(self.found.p99_ms)
            and self.found.p99_ms < bound_ms
        )


def client_steps(users: int, steps: int) -> list[int]:
    """Clients in each step: an even ramp up to `users` (no step twice the same)."""
    counts: list[int] = []
    for k in range(1, steps + 1):
        count = max(1, math.ceil(users * k / steps))
        if not counts or count > counts[-1]:
            counts.append(count)
    return counts


def run(args: argparse.Namespace) -> int:
    return run_profile(args, _run)


def _run(ctx: Context) -> int:
    args = ctx.args
    topology = ctx.topology
    access = topology.start_hub(reference_args=["--max-concurrent", str(args.agent_concurrency)])
    root = topology.prepare_root(args.answer_bytes)
    real_sessions = [f"{ctx.prefix}-real-{n:03d}" for n in range(args.real_agents)]
    if real_sessions:
        topology.start_real_agents(real_sessions, access.url, root)
    if not args.agents and not real_sessions:
        return fail("no agent to load: give --agents or --real-agents")
    duration = args.duration or DEFAULT_DURATION
    agent_classes = ["RelayAgent"] if args.agents else []
    if args.step:
        counts = client_steps(args.users, args.steps)
        stages = [
            Stage(f"step {n}", args.agents + c, args.step_seconds, [*agent_classes, "RelayClient"])
            for n, c in enumerate(counts, 1)
        ]
    else:
        counts = [args.users]
        stages = [Stage("run", args.agents + args.users, duration, [*agent_classes, "RelayClient"])]
    plan = ctx.plan(
        "relay",
        access,
        agent_url=access.url,
        client_url=topology.client_url(access),
        load_agents=args.agents,
        real_sessions=real_sessions,
        clients=args.users,
        root=str(root),
        mix=args.mix_weights,
        answer_bytes=args.answer_bytes,
        service_seconds=args.service_ms / 1000.0,
        agent_concurrency=args.agent_concurrency,
        in_flight=args.in_flight,
        rate_per_client=args.rate / args.users if args.rate else None,
        max_outstanding=args.max_outstanding,
        request_timeout=args.request_timeout,
        stages=stages,
        spawn_rate=args.spawn_rate or max(args.users + args.agents, 10),
    )
    echoes: list[tuple[float, float | None]] = []
    echo_url = topology.start_echo() if args.echo_seconds > 0 else None
    if echo_url is not None:
        echoes += _echo_baseline(ctx, plan, echo_url, max(counts), "echo-before")
    result = run_locust(plan, ctx.folder / "locust", ctx.distribution, topology)
    if echo_url is not None:
        echoes += _echo_baseline(ctx, plan, echo_url, max(counts), "echo-after")
    # The generator's ceiling: the better of the two (a busy machine only lowers it).
    echo_rps, echo_cpu_us = max(echoes, default=(None, None), key=lambda e: e[0])

    report = Report("relay", ctx.folder)
    loop = (
        f"open loop, {args.rate:g} req/s over all clients"
        if args.rate
        else f"closed loop, {args.in_flight} in flight per client"
    )
    report.add(
        f"tetherbed load relay: {ctx.describe_target()}; {args.agents} load agent(s), "
        f"{len(real_sessions)} real agent(s), up to {max(counts)} client(s), {loop}, "
        f"mix {args.mix}"
    )
    report.add("")
    report.lines += request_table(result, ["ws", "agent", "client"])
    requests = select(result.rows, types=["ws"])
    total = figures(requests)
    report.metrics.update(standard_metrics(total))
    report.figures["requests"] = total.as_dict()
    missing = [kind for kind in plan.mix if result.counts("ws").get(kind, 0) == 0]
    if missing:
        report.problems.append(f"no request of type {', '.join(missing)} was answered")
    hub_rps = total.rps
    if args.step:
        hub_rps = _knee(report, result.windows, requests, counts, args.p99_bound)
    report.add("")
    if echo_rps:
        ratio = hub_rps / echo_rps
        report.metrics["echo_ratio"] = ratio
        report.figures["echo"] = {
            "rps": echo_rps,
            "cpu_us_per_request": echo_cpu_us,
            "runs": [rps for rps, _ in echoes],
        }
        report.add(
            f"hub rate / raw websockets echo rate (same run): {hub_rps:,.0f} / {echo_rps:,.0f} "
            f"req/s = {ratio:.2f}  (echo before and after the run: "
            f"{', '.join(f'{rps:,.0f}' for rps, _ in echoes)} req/s; the better one counts)"
            + (
                f"   (the echo cost the generator {echo_cpu_us:.0f} µs of CPU per request)"
                if echo_cpu_us
                else ""
            )
        )
    report.lines += generator_lines(result, ctx.workers, echo_rps, hub_rps)
    if result.hub is not None:
        report.add("hub (its own /metrics):")
        report.lines += [f"  {line}" for line in result.hub.lines()]
    hub_cpu = result.cpu.get("hub", 0.0)
    if hub_cpu and total.requests:
        report.add(f"hub CPU: {hub_cpu / total.requests * 1e6:.0f} µs per request")
    return finish(report, result, ctx.conditions, as_json=args.json)


def _knee(
    report: Report, windows: list[Window], rows: list, counts: list[int], bound_ms: float
) -> float:
    """The steps' table and the knee; the knee's rate (or the best step's)."""
    steps = []
    for window, clients in zip(windows, counts, strict=False):
        found = figures(rows, window.start + SETTLE_SECONDS, window.end)
        steps.append(StepFigures(window, clients, found))
    report.add("")
    report.add(f"steps (first {SETTLE_SECONDS:g} s of each left out):")
    report.add(f"  {'step':<9}{'clients':>8}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'fails':>7}")
    for step in steps:
        mark = "" if step.within(bound_ms) else f"   p99 ≥ {bound_ms:g} ms or failures"
        report.add(
            f"  {step.window.name:<9}{step.clients:>8}{step.found.rps:>10,.0f}"
            f"{step.found.p50_ms:>9.3g}{step.found.p99_ms:>9.3g}{step.found.failures:>7}{mark}"
        )
    good = [s for s in steps if s.within(bound_ms)]
    report.figures["steps"] = [
        {"name": s.window.name, "clients": s.clients, **s.found.as_dict()} for s in steps
    ]
    report.figures["p99_bound_ms"] = bound_ms
    if not good:
        report.add(f"knee: no step kept p99 under {bound_ms:g} ms without failures")
        report.metrics["knee_rps"] = 0.0
        return max((s.found.rps for s in steps), default=0.0)
    knee = max(good, key=lambda s: s.found.rps)
    report.metrics["knee_rps"] = knee.found.rps
    report.figures["knee"] = {"step": knee.window.name, "rps": knee.found.rps}
    report.add(
        f"knee: {knee.found.rps:,.0f} req/s at p99 < {bound_ms:g} ms "
        f"({knee.window.name}, {knee.clients} clients, p99 {knee.found.p99_ms:.3g} ms)"
    )
    return knee.found.rps


def _echo_baseline(
    ctx: Context, plan: Plan, url: str, clients: int, name: str
) -> list[tuple[float, float | None]]:
    """One Locust process, the run's clients, against a raw websockets echo: its
    rate and CPU per request (nothing when it measured nothing)."""
    # One second to open the connections, and one more so that the window
    # holds `--echo-seconds` whole seconds whatever the start's fraction.
    seconds = ctx.args.echo_seconds + ECHO_SETTLE_SECONDS + 1
    echo = Plan(
        profile="relay",
        agent_url=url,
        client_url=url,
        user="echo",
        agent_token="none",
        client_token="none",
        session_prefix=f"{ctx.prefix}-echo",
        real_sessions=["echo"],
        clients=clients,
        root=plan.root,
        mix=plan.mix,
        answer_bytes=plan.answer_bytes,
        in_flight=plan.in_flight,
        echo=True,
        request_timeout=plan.request_timeout,
        stages=[Stage("echo", clients, seconds, ["RelayClient"])],
        spawn_rate=max(clients, 10),
        out_dir=str(ctx.folder / name),
    )
    result = run_locust(echo, ctx.folder / name, Distribution(), ctx.topology)
    if not result.windows:
        return []
    window = result.windows[0]
    found = figures(
        select(result.rows, types=["ws"]), window.start + ECHO_SETTLE_SECONDS, window.end
    )
    if not found.requests:
        return []
    cpu = result.cpu.get("generator", 0.0)
    total = sum(r.count for r in result.rows if r.type == "ws")
    return [(found.rps, cpu / total * 1e6 if total else None)]
