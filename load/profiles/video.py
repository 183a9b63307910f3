"""video: the native adapter's video listener under viewers that ack fast, slowly or never.

The adapter runs on its own Xvfb display (`--size`) with moving bars painted
on it. Phase 1 has `--users` fast viewers (and `--slow` slow ones); phase 2
the same plus one viewer that never acks. Per-viewer fps, latency, skipped
frames and keyframe requests are reported per phase; the figure is the fast
viewers' fps with the stalled viewer present as a ratio of their fps
without it (the listener's flow control must keep it near 1). The adapter's
resident memory is sampled throughout.
"""

from __future__ import annotations

import argparse
import math
import time

from tetherbed.load.analysis.timeline import figures, select
from tetherbed.load.locust_process import LocustRun
from tetherbed.load.native_adapter import AdapterError, GrantServer, NativeAdapter, running_adapter
from tetherbed.load.plan import Plan, Stage
from tetherbed.load.profiles.context import Context, context, fail
from tetherbed.load.run import Report, finish, request_table, run_locust, standard_metrics

#: The first seconds of a phase (viewers opening, the first keyframe) are left out.
SETTLE_SECONDS = 2.0
#: The listener serves at most this many viewers (agent/native/video/listener.py).
MAX_VIEWERS = 8


def run(args: argparse.Namespace) -> int:
    if args.users + args.slow + 1 > MAX_VIEWERS:
        return fail(f"at most {MAX_VIEWERS} viewers: --users + --slow + the stalled one")
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        return fail(f"--size {args.size!r}: expected WIDTHxHEIGHT")
    with context(args) as ctx:
        try:
            with running_adapter(ctx.folder, width, height, ["--quality", args.quality]) as (
                adapter,
                grants,
            ):
                return _run(ctx, adapter, grants)
        except AdapterError as exc:
            return fail(f"the native adapter: {exc}")


def _viewers(count: int, kind: str) -> list[str]:
    """The frame names of every viewer of a kind (users/viewers.py)."""
    return [f"frame ({kind} {n})" for n in range(1, count + 1)]


def _run(ctx: Context, adapter: NativeAdapter, grants: GrantServer) -> int:
    args = ctx.args
    seconds = args.phase_seconds + SETTLE_SECONDS
    steady = ["FastViewer"] + (["SlowViewer"] if args.slow else [])
    plan = Plan(
        profile="video",
        agent_url="",
        client_url="",
        user="",
        agent_token="",
        client_token="",
        session_prefix=ctx.prefix,
        grant_url=grants.url,
        fast_viewers=args.users,
        slow_viewers=args.slow,
        slow_ack_seconds=args.slow_ack_ms / 1000.0,
        stages=[
            Stage("without stalled viewer", args.users + args.slow, seconds, steady),
            Stage(
                "with stalled viewer",
                args.users + args.slow + 1,
                seconds,
                [*steady, "StalledViewer"],
            ),
        ],
        spawn_rate=args.spawn_rate or 20.0,
        out_dir=str(ctx.folder / "locust"),
    )
    memory: list[tuple[float, int]] = []
    listener = {"unacknowledged_bytes": 0, "dropped": 0}

    def tick(run: LocustRun) -> None:
        if memory and time.monotonic() - memory[-1][0] < 0.5:
            return
        rss = adapter.rss_bytes()
        if rss is not None:
            memory.append((time.monotonic(), rss))
        try:
            output = adapter.call("status", timeout=5)["video_output"]
        except (AdapterError, KeyError, TypeError):
            return
        listener["unacknowledged_bytes"] = max(
            listener["unacknowledged_bytes"], int(output.get("unacknowledged_bytes", 0))
        )
        listener["dropped"] = int(output.get("dropped", listener["dropped"]))

    result = run_locust(
        plan,
        ctx.folder / "locust",
        ctx.distribution,
        ctx.topology,
        tick=tick,
        extra_cpu={"adapter": adapter.pid},
    )
    report = Report("video", ctx.folder)
    report.add(
        f"tetherbed load video: Tetherbed's native adapter on a {args.size} Xvfb display "
        f"(quality {args.quality}); {args.users} fast viewer(s), {args.slow} slow "
        f"(ack after {args.slow_ack_ms:g} ms), then one stalled viewer added"
    )
    report.add("")
    report.lines += request_table(result, ["video"])
    report.add("")
    frames = select(result.rows, types=["video"])
    fast_names = _viewers(args.users, "fast")
    report.metrics.update(standard_metrics(figures(select(frames, names=fast_names))))
    fps: dict[str, dict[str, float]] = {}
    slowest: dict[str, float] = {}
    for window in result.windows:
        report.add(f"{window.name}:")
        fps[window.name] = {}
        start = window.start + SETTLE_SECONDS
        for kind, count in (("fast", args.users), ("slow", args.slow), ("stalled", 1)):
            if not count or (kind == "stalled" and window is result.windows[0]):
                continue
            names = _viewers(count, kind)
            found = figures(select(frames, names=names), start, window.end)
            each = [figures(select(frames, names=[n]), start, window.end).rps for n in names]
            if kind == "fast":
                slowest[window.name] = min(each)
            skipped = figures(
                select(frames, names=[f"skipped ({kind})"]),
                window.start + SETTLE_SECONDS,
                window.end,
            )
            asks = figures(
                select(frames, names=[f"keyframe request ({kind})"]),
                window.start + SETTLE_SECONDS,
                window.end,
            )
            keyframes = figures(
                select(frames, names=[f"keyframe ({kind})"]),
                window.start + SETTLE_SECONDS,
                window.end,
            )
            per_viewer = found.rps / count
            fps[window.name][kind] = per_viewer
            latency = (
                f"latency p50 {found.p50_ms:.3g} ms, p99 {found.p99_ms:.3g} ms"
                if math.isfinite(found.p50_ms)
                else "no frame"
            )
            viewers = ", ".join(f"{f:.1f}" for f in each)
            report.add(
                f"  {kind:<8} {per_viewer:6.1f} fps per viewer ({viewers}), {latency}, "
                f"{skipped.requests} skipped, {keyframes.requests} keyframe(s) received, "
                f"{asks.requests} asked for"
            )
    phases = [w.name for w in result.windows]
    if len(phases) == 2 and fps[phases[0]].get("fast"):
        ratio = fps[phases[1]].get("fast", 0.0) / fps[phases[0]]["fast"]
        report.metrics["fps_ratio"] = ratio
        report.figures["fps_ratio"] = ratio
        verdict = "ok" if ratio >= 0.9 else "below the 0.9 target"
        report.add(
            f"fast viewers' fps with a stalled viewer ÷ without: {ratio:.2f} ({verdict}); the "
            f"slowest fast viewer: {slowest.get(phases[0], 0.0):.1f} fps without, "
            f"{slowest.get(phases[1], 0.0):.1f} with"
        )
    else:
        report.problems.append("the fast viewers received no frame in the first phase")
    report.figures["fps"] = fps
    if memory:
        peak = max(rss for _, rss in memory)
        report.figures["adapter_rss_mib_peak"] = peak / 2**20
        report.add(
            f"adapter resident memory: {memory[0][1] / 2**20:.1f} MiB at the start, peak "
            f"{peak / 2**20:.1f} MiB, {memory[-1][1] / 2**20:.1f} MiB at the end"
        )
    report.add(
        f"listener (its status): at most {listener['unacknowledged_bytes']:,} bytes "
        f"unacknowledged at once, {listener['dropped']:,} frame(s) skipped for congestion"
    )
    report.figures["listener"] = listener
    busy = result.cpu.get("adapter", 0.0) / max(result.wall_seconds, 1e-9)
    report.add(f"adapter CPU {busy * 100:.0f}% of a core; {grants.granted} ticket(s) granted")
    return finish(report, result, ctx.conditions, as_json=args.json)
