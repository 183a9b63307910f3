"""Live-video benchmark: capture → H.264 → loopback WebSocket viewers, at 1920 × 1080.

A real `tetherbed native --video-ws` process watches an Xvfb display on which bars
move at twice the requested frame rate (so the content never limits the rate).
Two phases, measured in the same run:

* ``one``: a single viewer that acks every frame (the baseline);
* ``eight``: eight viewers, seven acking and one that never acks.

The two alternate for `--rounds` rounds on one adapter process. Per round it
prints viewer fps and capture-to-viewer latency (the CDV1 timestamp is the
adapter's CLOCK_MONOTONIC capture time; the viewer stamps receipt with the same
clock), the slowest fast viewer's fps as a ratio of that round's one-viewer fps
(target ≥ 0.9), and the stalled viewer's outstanding frames and bytes (must stay
within 8 / 1 MiB); then the medians over the rounds.
Then, in this process and without viewers, the ``copies`` phase: pictures grabbed
from the same display go through the capture call and the adapter's video pipeline
one at a time, under tracemalloc, to count what the video path allocates per
picture in Python objects (a copy of a picture shows up as its size), and again
without tracemalloc for the CPU time a picture costs (all threads; nothing else
runs then).

Numbers are printed, never asserted; the exit status is 0 whatever they are.

    .venv/bin/python bench/video.py [--seconds 6] [--rounds 3] [--quality NAME]
                                    [--pictures 120] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import queue
import secrets
import statistics
import sys
import tempfile
import time
import tracemalloc
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.native.harness import NativeProcess  # noqa: E402
from tetherbed.agent.desktop.capture import Frame, ScreenCapture  # noqa: E402
from tetherbed.agent.desktop.xvfb import XvfbDisplay  # noqa: E402
from tetherbed.agent.native.devices import register_device  # noqa: E402
from tetherbed.agent.native.frames import Picture  # noqa: E402
from tetherbed.agent.native.observations import Rect  # noqa: E402
from tetherbed.agent.native.quality import DEFAULT, PRESETS  # noqa: E402
from tetherbed.agent.native.video.frames import H264_PROTOCOL, NV12_PROTOCOL  # noqa: E402
from tetherbed.agent.native.video.pipeline import VideoPipeline  # noqa: E402
from tetherbed.agent.native.video.viewer import Viewer  # noqa: E402
from tetherbed.simulator.peripherals.screen_noise import ScreenNoise  # noqa: E402

ORIGIN = "http://127.0.0.1:4173"
WARMUP_S = 1.0


@dataclass
class ViewerResult:
    frames: int
    fps: float
    latency_p50_ms: float
    latency_p95_ms: float
    mbit_s: float
    skipped: int  # sequence numbers this viewer never got (flow-control skips), from the wire


@dataclass
class PhaseResult:
    name: str
    fast: list[ViewerResult]
    stalled_frames: int = 0
    stalled_bytes: int = 0
    max_unacked_bytes_status: int = 0
    adapter_cpu_percent: float = 0.0
    viewers_cpu_percent: float = 0.0  # this process: the viewers, acks and status polls


@dataclass
class CopiesResult:
    """Per picture, medians: Python-heap bytes at the peak above the steady state."""

    protocol: str
    pictures: int
    bgra_bytes: int  # one captured picture
    nv12_bytes: int  # one picture as NV12
    capture_peak_bytes: int  # during ScreenCapture.grab()
    capture_cpu_ms: float  # this process's CPU for one grab() (the X server's is not in it)
    pipeline_peak_bytes: int  # from submit() to the message in the sink
    message_bytes: int  # the message itself (part of pipeline_peak_bytes)
    pipeline_cpu_ms: float  # process CPU from submit() to the message, without tracemalloc


def new_id() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(24)).decode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_grant(native: NativeProcess) -> tuple[str, str]:
    ticket = new_id()
    grant = native.result(
        "video_open",
        ticket=ticket,
        view=new_id(),
        view_generation=1,
        session=new_id(),
        origin=ORIGIN,
        apps=None,
    )
    return grant["url"], ticket


async def watch(viewer: Viewer, until: float) -> None:
    while time.monotonic() < until:
        try:
            await asyncio.wait_for(viewer.receive(), max(0.05, until - time.monotonic()))
        except TimeoutError:
            return


def summarize(viewer: Viewer, start: float, end: float) -> ViewerResult:
    window = [r for r in viewer.frames if start <= r.received_at <= end]
    latencies = sorted((r.received_at - r.message.timestamp_us / 1e6) * 1000 for r in window) or [
        float("nan")
    ]
    seconds = end - start
    sequences = [r.message.sequence for r in window]
    skipped = (max(sequences) - min(sequences) + 1 - len(sequences)) if sequences else 0
    return ViewerResult(
        frames=len(window),
        fps=len(window) / seconds,
        latency_p50_ms=statistics.median(latencies),
        latency_p95_ms=latencies[int(0.95 * (len(latencies) - 1))],
        mbit_s=sum(r.size for r in window) * 8 / seconds / 1e6,
        skipped=skipped,
    )


async def phase(native: NativeProcess, name: str, fast: int, stalled: int, seconds: float):
    viewers = []
    for i in range(fast + stalled):
        url, ticket = await asyncio.to_thread(open_grant, native)
        viewers.append(await Viewer.open(url, ticket, origin=ORIGIN, ack=i < fast))
    begin = time.monotonic()
    start, end = begin + WARMUP_S, begin + WARMUP_S + seconds
    cpu_before = cpu_seconds(native.pid)
    own_before = time.process_time()
    max_status_bytes = 0

    async def sample_status() -> None:
        nonlocal max_status_bytes
        while time.monotonic() < end:
            status = await asyncio.to_thread(native.result, "status")
            out = status["video_output"]
            max_status_bytes = max(max_status_bytes, out["unacknowledged_bytes"])
            await asyncio.sleep(0.25)

    await asyncio.gather(*(watch(v, end) for v in viewers), sample_status())
    elapsed = time.monotonic() - begin
    cpu = (cpu_seconds(native.pid) - cpu_before) / elapsed * 100
    own = (time.process_time() - own_before) / elapsed * 100
    result = PhaseResult(
        name,
        [summarize(v, start, end) for v in viewers[:fast]],
        adapter_cpu_percent=cpu,
        viewers_cpu_percent=own,
        max_unacked_bytes_status=max_status_bytes,
    )
    if stalled:
        frames = viewers[fast].frames
        result.stalled_frames = len(frames)  # it never acked: all of them are outstanding
        result.stalled_bytes = sum(r.size for r in frames)
    for viewer in viewers:
        await viewer.close()
    await asyncio.sleep(0.5)
    return result


def grab_pictures(display: str, count: int) -> list[Frame]:
    """`count` different pictures of the changing display (the noise painter runs)."""
    capture = ScreenCapture(display)
    frames: list[Frame] = []
    try:
        while len(frames) < count:
            frame = capture.grab()
            if not frames or frame.data != frames[-1].data:
                frames.append(frame)
            time.sleep(0.02)
    finally:
        capture.close()
    return frames


def capture_cost(display: str, rounds: int) -> tuple[int, float]:
    """Median peak bytes of one `grab()` under tracemalloc, and its CPU ms without it."""
    capture = ScreenCapture(display)
    peaks, cpu = [], []
    try:
        capture.grab()  # opens the X connection outside the measurement
        tracemalloc.start()
        for _ in range(rounds):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            frame = capture.grab()
            peaks.append(tracemalloc.get_traced_memory()[1] - base)
            del frame
        tracemalloc.stop()
        for _ in range(rounds):
            before = time.process_time()
            frame = capture.grab()
            cpu.append((time.process_time() - before) * 1000)
            del frame
    finally:
        capture.close()
    return int(statistics.median(peaks)), statistics.median(cpu)


def copies(
    frames: list[Frame], protocol: str, quality: str, pictures: int, grab: tuple[int, float]
) -> CopiesResult:
    """The video pipeline alone, one picture at a time: allocations, then CPU."""
    preset = PRESETS[quality]
    out: queue.Queue = queue.Queue()
    pipeline = VideoPipeline(
        protocol=protocol,
        sink=out.put,
        max_size=(preset.max_width, preset.max_height),
        fps=preset.fps,
        crf=preset.crf,
    )
    pipeline.set_active(True)
    serial = 0

    def one(frame: Frame) -> object:
        nonlocal serial
        serial += 1
        rect = Rect(frame.left, frame.top, frame.width, frame.height)
        picture = Picture(serial, pipeline.generation, 0, frame, rect, time.monotonic())
        pipeline.submit(picture)
        return out.get(timeout=30)

    try:
        for frame in frames[:4]:  # the encoder opens, swscale builds its tables
            one(frame)
        peaks, sizes = [], []
        tracemalloc.start()
        for i in range(pictures):
            frame = frames[i % len(frames)]
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            message = one(frame)
            peaks.append(tracemalloc.get_traced_memory()[1] - base)
            sizes.append(message.size)  # type: ignore[attr-defined]
            del message
        tracemalloc.stop()
        cpu = []
        for i in range(pictures):
            frame = frames[i % len(frames)]
            before = time.process_time()
            one(frame)
            cpu.append((time.process_time() - before) * 1000)
    finally:
        pipeline.stop()
    width, height = frames[0].width, frames[0].height
    return CopiesResult(
        protocol=protocol,
        pictures=pictures,
        bgra_bytes=width * height * 4,
        nv12_bytes=width * height * 3 // 2,
        capture_peak_bytes=grab[0],
        capture_cpu_ms=grab[1],
        pipeline_peak_bytes=int(statistics.median(peaks)),
        message_bytes=int(statistics.median(sizes)),
        pipeline_cpu_ms=statistics.median(cpu),
    )


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds a phase")
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating one/eight rounds (0: copies only)"
    )
    parser.add_argument("--quality", default=DEFAULT, choices=sorted(PRESETS))
    parser.add_argument("--pictures", type=int, default=120, help="pictures in the copies phase")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load_before = load_average()
    workdir = Path(tempfile.mkdtemp(prefix="tetherbed-bench-video-"))
    registry = workdir / "devices.json"
    with XvfbDisplay(1920, 1080, 24) as xvfb:
        # Painting at twice the requested rate: every sample the adapter takes has changed.
        with ScreenNoise(xvfb.name, fps=2 * PRESETS[args.quality].fps):
            rounds = viewer_rounds(xvfb.name, registry, args)
            frames = grab_pictures(xvfb.name, 8)
        grab = capture_cost(xvfb.name, 20)
        measured = [copies(frames, p, args.quality, args.pictures, grab) for p in PROTOCOLS]
    load_after = load_average()
    if args.json:
        print(
            json.dumps(
                {
                    "quality": asdict(PRESETS[args.quality]),
                    "load_average": [load_before, load_after],
                    "rounds": [
                        {"one": asdict(one), "eight": asdict(eight), "ratio": ratio(one, eight)}
                        for one, eight in rounds
                    ],
                    "summary": summary(rounds) if rounds else None,
                    "copies": [asdict(m) for m in measured],
                }
            )
        )
        return 0
    preset = PRESETS[args.quality]
    print(
        f"bench/video.py: 1920x1080, quality {args.quality} ({preset.max_width}x"
        f"{preset.max_height} at {preset.fps} fps requested), {args.rounds} rounds of "
        f"{args.seconds:.0f} s phases; load average {load_before} before, {load_after} after"
    )
    for number, (one, eight) in enumerate(rounds, 1):
        report(number, one, eight)
    if rounds:
        print_summary(rounds)
    for m in measured:
        print(
            f"\n[copies, {m.protocol}] per picture (median of {m.pictures}): capture peak "
            f"{m.capture_peak_bytes / m.bgra_bytes:.2f} x BGRA, CPU {m.capture_cpu_ms:.1f} ms; "
            "pipeline peak "
            f"{m.pipeline_peak_bytes / m.nv12_bytes:.2f} x NV12 ({m.pipeline_peak_bytes} B, "
            f"of which the message {m.message_bytes} B), CPU {m.pipeline_cpu_ms:.1f} ms"
        )
    return 0


PROTOCOLS = (H264_PROTOCOL, NV12_PROTOCOL)


def viewer_rounds(
    display: str, registry: Path, args: argparse.Namespace
) -> list[tuple[PhaseResult, PhaseResult]]:
    """Rounds of one viewer then eight (one stalled), on one real adapter process.

    Alternating keeps each ratio's two phases seconds apart, so a change in the
    machine's load between rounds shifts both sides of it.
    """
    device_id, password = register_device(registry, display)
    native = NativeProcess(
        password=password,
        registry=registry,
        args=["--video-ws", "--quality", args.quality],
        stderr_path=registry.parent / "native.stderr",
    )
    rounds = []
    try:
        native.result("connect", device=device_id, mode="observe", display=0)
        native.wait_ready()
        for _ in range(args.rounds):
            one = asyncio.run(phase(native, "one", 1, 0, args.seconds))
            eight = asyncio.run(phase(native, "eight", 7, 1, args.seconds))
            rounds.append((one, eight))
    finally:
        native.stop()
    return rounds


def ratio(one: PhaseResult, eight: PhaseResult) -> float:
    """The slowest fast viewer of the eight as a share of the lone viewer."""
    base = one.fast[0].fps
    return min(v.fps for v in eight.fast) / base if base else 0.0


def summary(rounds: list[tuple[PhaseResult, PhaseResult]]) -> dict[str, float]:
    return {
        "solo_fps": statistics.median(one.fast[0].fps for one, _ in rounds),
        "eight_min_fps": statistics.median(min(v.fps for v in e.fast) for _, e in rounds),
        "ratio": statistics.median(ratio(one, eight) for one, eight in rounds),
        "solo_p50_ms": statistics.median(one.fast[0].latency_p50_ms for one, _ in rounds),
        "eight_p50_ms": statistics.median(
            statistics.median(v.latency_p50_ms for v in e.fast) for _, e in rounds
        ),
    }


def print_summary(rounds: list[tuple[PhaseResult, PhaseResult]]) -> None:
    s = summary(rounds)
    verdict = "ok" if s["ratio"] >= 0.9 else "MISS"
    print(
        f"\nsummary (medians of {len(rounds)} rounds): solo {s['solo_fps']:.1f} fps; eight "
        f"viewers, one stalled: slowest fast viewer {s['eight_min_fps']:.1f} fps = "
        f"{s['ratio']:.2f} x solo of its round (target >= 0.9: {verdict}); capture-to-viewer "
        f"p50 solo {s['solo_p50_ms']:.1f} ms, eight {s['eight_p50_ms']:.1f} ms"
    )


def report(number: int, one: PhaseResult, eight: PhaseResult) -> None:
    solo = one.fast[0]
    fps = [v.fps for v in eight.fast]
    p50 = [v.latency_p50_ms for v in eight.fast]
    within = eight.stalled_frames <= 8 and (
        eight.stalled_bytes <= 1024 * 1024 or eight.stalled_frames == 1
    )
    print(
        f"\n[round {number}] one: {solo.fps:5.1f} fps, p50 {solo.latency_p50_ms:5.1f} ms, "
        f"p95 {solo.latency_p95_ms:5.1f} ms, {solo.mbit_s:4.1f} Mbit/s, adapter CPU "
        f"{one.adapter_cpu_percent:.0f}%, viewers {one.viewers_cpu_percent:.0f}%\n"
        f"          eight: fast {min(fps):5.1f}-{max(fps):5.1f} fps (ratio "
        f"{ratio(one, eight):.2f}; skipped {max(v.skipped for v in eight.fast)} of the "
        f"encoded, solo {solo.skipped}), p50 {min(p50):5.1f}-{max(p50):5.1f} ms, adapter CPU "
        f"{eight.adapter_cpu_percent:.0f}%, viewers {eight.viewers_cpu_percent:.0f}%; "
        f"stalled viewer holds {eight.stalled_frames} frames, "
        f"{eight.stalled_bytes} B (cap 8 / 1 MiB: {'ok' if within else 'MISS'}), max "
        f"status.unacknowledged_bytes {eight.max_unacked_bytes_status}"
    )


if __name__ == "__main__":
    sys.exit(main())
