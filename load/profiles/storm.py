"""storm: how the hub takes a reconnect storm — judged from the recording.

`--users K` load agents connect through the recorder. Once every session is
served (seen on the wire), they are dropped together: `--drop partition`
(the recorder cuts every connection and refuses new ones for `--drop-seconds`)
or `--drop restart` (the hub is killed and started again: a hub Tetherbed
runs). They come back on the spec's backoff, or all at once with
`--reconnect immediate`. The run ends when every session is served again, or
after `--recovery-timeout`. What is measured is the hub: the time until all
sessions are served again, its accept latency and rate, refusals, and lost
sessions. With Tetherbed's hub, also its memory per agent connection.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from tetherbed.load.analysis.hub_metrics import scrape
from tetherbed.load.analysis.recording import RecordTail
from tetherbed.load.analysis.storm import StormWatch, percentile
from tetherbed.load.analysis.timeline import figures, select
from tetherbed.load.cpu_sampler import resident_bytes
from tetherbed.load.locust_process import LocustRun
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

#: Seconds to wait, once every session is served, before the drop.
SETTLE_SECONDS = 2.0
#: The longest the agents may take to connect the first time.
CONNECT_BUDGET = 300.0
RSS = "tetherbed_hub_process_resident_memory_bytes"


@dataclass
class _Storm:
    """The orchestrator's side of the storm, driven from Locust's wait loop."""

    ctx: Context
    watch: StormWatch
    tail: RecordTail
    rss_before: float | None = None
    rss_connected: float | None = None
    connected_at: float | None = None
    recovered_at: float | None = None
    gave_up: bool = False
    phase: str = "connecting"

    def tick(self, run: LocustRun) -> None:
        self.watch.feed(self.tail.read())
        now = time.time()
        args = self.ctx.args
        if self.phase == "connecting":
            if self.watch.all_served:
                self.connected_at = now
                self.rss_connected = self._rss()
                self.phase = "settling"
            elif now - run.started > CONNECT_BUDGET:
                self.gave_up = True
                run.stop_early()
        elif self.phase == "settling" and now - (self.connected_at or now) >= SETTLE_SECONDS:
            if args.drop == "none":
                if now - (self.connected_at or now) >= SETTLE_SECONDS + args.drop_seconds:
                    self.rss_connected = self._rss()
                    self.phase = "done"
                    run.stop_early()
                return
            self._drop()
        elif self.phase == "recovering":
            if self.watch.all_served_again:
                self.recovered_at = max(self.watch.served_again.values())
                self.phase = "done"
                run.stop_early()
            elif now - (self.watch.heal_at or now) > args.recovery_timeout:
                self.phase = "done"
                self.gave_up = True
                run.stop_early()

    def _drop(self) -> None:
        topology = self.ctx.topology
        args = self.ctx.args
        if args.drop == "restart":
            self.watch.drop_at = topology.restart_hub()
            self.watch.heal_at = time.time()
        else:
            recorder = topology.recorder
            assert recorder is not None
            self.watch.drop_at = time.time()
            recorder.partition()
            time.sleep(args.drop_seconds)
            recorder.heal()
            self.watch.heal_at = time.time()
        self.phase = "recovering"

    def _rss(self) -> float | None:
        """The hub's resident memory: from /proc when this run started it (any
        hub), else from Tetherbed's hub's /metrics."""
        pid = self.ctx.topology.hub_pid
        if pid is not None:
            found = resident_bytes(pid)
            return float(found) if found is not None else None
        url = self.ctx.topology.metrics_url()
        metrics = scrape(url) if url else None
        return metrics.get((RSS, ())) if metrics else None


def run(args: argparse.Namespace) -> int:
    return run_profile(args, _run)


def _run(ctx: Context) -> int:
    args = ctx.args
    topology = ctx.topology
    if args.drop == "restart" and not ctx.target.hub.startable:
        return fail("--drop restart needs a hub Tetherbed starts (its own, or --hub-command)")
    access = topology.start_hub()
    recorder = topology.start_recorder()
    budget = CONNECT_BUDGET + SETTLE_SECONDS + args.drop_seconds + args.recovery_timeout + 30
    plan = ctx.plan(
        "storm",
        access,
        agent_url=recorder.url,
        client_url=access.url,
        load_agents=args.users,
        root=str(topology.prepare_root(0)),
        reconnect=args.reconnect,
        stages=[Stage("storm", args.users, args.duration or budget, ["StormAgent"])],
        spawn_rate=args.spawn_rate or 200.0,
    )
    storm = _Storm(ctx, StormWatch(args.users), RecordTail(recorder.records))
    storm.rss_before = storm._rss()
    result = run_locust(plan, ctx.folder / "locust", ctx.distribution, topology, tick=storm.tick)
    storm.watch.feed(storm.tail.read())
    watch = storm.watch

    report = Report("storm", ctx.folder)
    how = {
        "partition": f"partition at the recorder for {args.drop_seconds:g} s (connections cut, "
        "new ones held until the heal)",
        "restart": "hub killed (SIGKILL) and restarted",
        "none": f"none (held idle {SETTLE_SECONDS + args.drop_seconds:g} s, for memory)",
    }[args.drop]
    report.add(
        f"tetherbed load storm: {ctx.describe_target()}; {args.users} load agent(s) through the "
        f"recorder; drop: {how}; reconnect: {args.reconnect}"
    )
    report.add("")
    report.lines += request_table(result, ["agent"])
    report.add("")
    reconnects = figures(select(result.rows, types=["agent"], names=["reconnect"]))
    report.metrics.update(standard_metrics(reconnects))
    first_served = watch.all_served_at()
    if first_served is None:
        report.problems.append(
            f"only {len(watch.first_served)} of {args.users} sessions were ever served"
        )
    else:
        spread = first_served - min(watch.first_served.values())
        report.add(
            f"first connect: all {args.users} sessions served within {spread:.1f} s of the "
            f"first one (spawned at {plan.spawn_rate:g} agents/s)"
        )
    lost = args.users - len(watch.served_again)
    report.metrics["lost"] = float(lost)
    report.metrics["refused"] = float(sum(watch.refused.values()))
    if args.drop == "none":
        report.metrics["lost"] = None
        report.metrics["refused"] = None
    elif watch.drop_at is None:
        report.problems.append("the storm never started: not every session was served first")
    else:
        assert watch.heal_at is not None
        report.add(
            f"drop at +0.0 s, heal at +{watch.heal_at - watch.drop_at:.1f} s; "
            f"{watch.attempts_after_drop:,} connection attempts after the drop"
        )
        if watch.served_again:
            last = max(watch.served_again.values())
            report.metrics["recovery_s"] = last - watch.heal_at
            report.add(
                f"served again: {len(watch.served_again)}/{args.users} sessions; all of them "
                f"{last - watch.heal_at:.2f} s after the heal ({last - watch.drop_at:.2f} s after "
                "the drop)"
                if lost == 0
                else f"served again: {len(watch.served_again)}/{args.users} sessions by the end"
            )
        report.add(f"lost sessions (never served again): {lost}")
        accept = list(watch.accept_seconds.values())
        peak, mean = watch.accept_rate()
        p50, p99 = percentile(accept, 0.5) * 1000, percentile(accept, 0.99) * 1000
        slowest = max(accept, default=float("nan")) * 1000
        report.add(
            "the hub's share of the attempt that got through (upgrade → 101, HELLO → HELLO_ACK): "
            f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {slowest:.0f} ms; accept rate peak "
            f"{peak:.0f}/s, mean {mean:.0f}/s"
        )
        firsts = sorted(max(t - watch.heal_at, 0.0) for t in watch.first_attempt.values())
        if firsts:
            report.add(
                f"the agents' own backoff (ours, by construction): first attempts after the heal "
                f"from +{firsts[0]:.1f} s to +{firsts[-1]:.1f} s"
            )
        report.add(
            f"refused upgrades {dict(watch.refused) or 'none'}, hub closes "
            f"{dict(watch.hub_closes) or 'none'}, attempts the recorder could not pass on "
            f"(hub down) {watch.unreachable}"
        )
        report.figures["storm"] = {
            "agents": args.users,
            "drop": args.drop,
            "heal_after_s": watch.heal_at - watch.drop_at,
            "served_again": len(watch.served_again),
            "lost": lost,
            "recovery_s": report.metrics.get("recovery_s"),
            "accept_ms_p50": p50,
            "accept_ms_p99": p99,
            "accept_rate_peak": peak,
            "accept_rate_mean": mean,
            "refused": dict(watch.refused),
            "hub_closes": dict(watch.hub_closes),
        }
    if storm.gave_up:
        report.problems.append("the storm did not finish in time (see above)")
    if storm.rss_before is not None and storm.rss_connected is not None:
        per = (storm.rss_connected - storm.rss_before) / args.users
        report.metrics["hub_kib_per_agent"] = per / 1024
        report.figures["hub_kib_per_agent"] = per / 1024
        report.add(
            f"hub memory per agent connection: {per / 1024:.1f} KiB (resident memory "
            f"{storm.rss_before / 2**20:.1f} → {storm.rss_connected / 2**20:.1f} MiB with "
            f"{args.users} agents connected)"
        )
    if result.hub is not None:
        report.add("hub (its own /metrics):")
        report.lines += [f"  {line}" for line in result.hub.lines()]
    report.lines += generator_lines(result, ctx.workers, None, 0.0)
    if result.cpu.get("recorder"):
        report.add(
            f"recorder CPU {result.cpu['recorder'] / max(result.wall_seconds, 1e-9) * 100:.0f}% "
            "of a core (if near 100%, the recorder, not the hub, limited the accept rate)"
        )
    return finish(report, result, ctx.conditions, as_json=args.json)
