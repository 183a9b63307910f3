"""Relay benchmark: the Tetherbed hub against two baselines measured in the same run.

Scenarios (each server, relay and agent is its own process, on uvloop):

* ``echo``: a raw `websockets` echo server; the ceiling of one client connection.
* ``minimal``: an aiohttp relay of the hub's shape (client endpoint + agent
  endpoint, frames copied untouched) with the fake agent behind it.
* ``hub``: the real ``tetherbed hub`` with the same fake agent (a real
  `AgentProtocol` answering every FILE_STAT at once).

The load client (this process) keeps exactly ``--in-flight`` 192-byte FILE_STAT
requests outstanding on one WebSocket, matches answers by id and records each
request's latency. Relay CPU is user+sys from /proc/PID/stat over the measured
window. Rounds are interleaved and the median is reported, because the
machines this runs on are small and noisy. Targets are printed, never enforced:
the exit status is 0 whatever the numbers.

    .venv/bin/python bench/relay.py [--rounds 5] [--seconds 1.5 | --requests N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import msgspec
import uvloop
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tetherbed.launch import HubProcess, start_hub
from tetherbed.wire.limits import FRAME_LIMIT_BYTES

PEERS_SCRIPT = Path(__file__).with_name("_relay_peers.py")
SCENARIOS = ("echo", "minimal", "hub")
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: The hub's max_concurrent: above the in-flight count, so that it never queues.
HUB_MAX_CONCURRENT = 128
#: A round fails if no answer arrives for this long.
STALL_SECONDS = 10.0


# --- targets -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    op: str  # "≥" or "≤"
    bound: float
    unit: str = ""

    def met(self, value: float) -> bool:
        return value >= self.bound if self.op == "≥" else value <= self.bound


TARGETS = {
    "relay/echo": Target("relay/echo", "≥", 0.5),
    "hub_cpu/minimal_cpu": Target("hub_cpu/minimal_cpu", "≤", 1.3),
    "hub_rps/minimal_rps": Target("hub_rps/minimal_rps", "≥", 0.9),
    "hub p99": Target("hub p99", "≤", 10.0, " ms"),
}


# --- CPU accounting ------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        raw = stat.read()
    # The command name (field 2) may contain spaces; fields resume after ")".
    fields = raw[raw.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# --- processes -------------------------------------------------------------------


@dataclass
class Peer:
    """A peer process from `_relay_peers.py`, in its own session, stopped by PID."""

    name: str
    proc: subprocess.Popen[bytes]
    stderr_path: Path
    announced: str = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text(errors="replace")[-4000:]
        return ""


def spawn_peer(name: str, workdir: Path, *args: str) -> Peer:
    stderr_path = workdir / f"{name}.stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(PEERS_SCRIPT), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return Peer(name, proc, stderr_path)


def wait_announced(peer: Peer, timeout: float = 20.0) -> str:
    """The first stdout line of `peer` (its address, or "ready")."""
    assert peer.proc.stdout is not None
    line = _read_line(peer.proc.stdout, time.monotonic() + timeout)
    if not line:
        raise RuntimeError(f"{peer.name} did not start:\n{peer.log()}")
    peer.announced = line
    return line


def _read_line(stream: IO[bytes], deadline: float) -> str:
    fd = stream.fileno()
    buffer = b""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return ""
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                return ""
            buffer += chunk
    return buffer.split(b"\n", 1)[0].decode("utf-8", "replace").strip()


def _url_of(line: str) -> str:
    return line.rsplit(" ", 1)[-1]


# --- the load client ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    #: The client endpoint the load client connects to.
    url: str
    headers: dict[str, str]
    #: The server/relay process whose CPU is accounted.
    relay_pid: int
    agent_pid: int | None
    #: The answer's type: echo sends the request back, relays the agent's answer.
    expect: str


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """How the load client drives one round."""

    in_flight: int
    frame_size: int
    warmup: float
    seconds: float
    #: Measure this many requests instead of `seconds`.
    requests: int | None


@dataclass(slots=True)
class RoundResult:
    scenario: str
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    relay_cpu_us: float
    agent_cpu_us: float | None
    client_cpu_us: float
    errors: int


class _Answer(msgspec.Struct):
    type: str = ""
    id: str | None = None


class RequestFrames:
    """FILE_STAT frames of exactly `size` bytes with fixed-width, unique ids."""

    def __init__(self, size: int) -> None:
        self._prefix = b'{"type":"FILE_STAT","id":"'
        head = f'","ts":{time.time():.3f},"version":"1.1","payload":{{"path":"/bench/'.encode()
        tail = b'","follow_symlinks":true}}'
        pad = size - len(self._prefix) - len(self._id(0)) - len(head) - len(tail)
        if pad < 0:
            raise ValueError(f"a FILE_STAT frame needs at least {size - pad} bytes")
        self._rest = head + b"p" * pad + tail
        self._next = 0

    @staticmethod
    def _id(n: int) -> str:
        return f"q{n:09d}"

    def next(self) -> tuple[str, bytes]:
        request_id = self._id(self._next)
        self._next += 1
        return request_id, self._prefix + request_id.encode() + self._rest


CpuSample = tuple[float, float | None, float]


async def load_round(scenario: Scenario, spec: LoadSpec) -> RoundResult:
    """One connection: warm up, measure, drain, close."""
    conn = await connect(
        scenario.url,
        additional_headers=scenario.headers,
        compression=None,
        max_size=FRAME_LIMIT_BYTES,
        ping_interval=None,
        proxy=None,
        open_timeout=10,
        close_timeout=2,
    )
    driver = _Driver(conn, scenario, spec)
    task = asyncio.ensure_future(driver.run())
    try:
        while not task.done():
            seen = driver.answers
            await asyncio.wait({task}, timeout=STALL_SECONDS)
            if not task.done() and driver.answers == seen:
                raise RuntimeError(
                    f"{scenario.name}: no answer for {STALL_SECONDS:.0f} s "
                    f"({len(driver.sent_at)} outstanding)"
                )
        return task.result()
    finally:
        if not task.done():  # stalled, or this round was cancelled (Ctrl-C)
            task.cancel()
            await asyncio.wait({task})
        await conn.close()


class _Driver:
    """Keeps `spec.in_flight` requests outstanding; measures a window after warm-up."""

    def __init__(self, conn: ClientConnection, scenario: Scenario, spec: LoadSpec) -> None:
        self.conn = conn
        self.scenario = scenario
        self.spec = spec
        self.frames = RequestFrames(spec.frame_size)
        #: request id → perf_counter() when it was sent.
        self.sent_at: dict[str, float] = {}
        self.answers = 0

    def _cpu(self) -> CpuSample:
        """CPU seconds of the relay, the agent (if any) and this process."""
        agent = self.scenario.agent_pid
        return (
            cpu_seconds(self.scenario.relay_pid),
            cpu_seconds(agent) if agent is not None else None,
            time.process_time(),
        )

    async def _send_next(self) -> None:
        request_id, frame = self.frames.next()
        self.sent_at[request_id] = time.perf_counter()
        await self.conn.send(frame, text=True)

    async def run(self) -> RoundResult:
        conn, sent_at, spec = self.conn, self.sent_at, self.spec
        decode = msgspec.json.Decoder(_Answer).decode
        clock = time.perf_counter
        expect = self.scenario.expect
        latencies: list[float] = []
        errors = 0
        for _ in range(spec.in_flight):
            await self._send_next()
        measure_from = clock() + spec.warmup
        start = end = 0.0
        cpu_start = cpu_end = self._cpu()
        sending = True
        while sent_at:
            data = await conn.recv(decode=False)
            now = clock()
            answer = decode(data)
            started = sent_at.pop(answer.id, None) if answer.id is not None else None
            if started is None:
                errors += answer.type == "ERROR"
                continue  # STATUS and other unsolicited frames
            self.answers += 1
            errors += answer.type != expect
            if not sending:
                continue  # draining
            if start:
                latencies.append(now - started)
                if spec.requests:
                    finished = len(latencies) >= spec.requests
                else:
                    finished = now - start >= spec.seconds
                if finished:
                    end, cpu_end, sending = now, self._cpu(), False
                    continue
            elif now >= measure_from:
                start, cpu_start = now, self._cpu()
            await self._send_next()
        return _summarize(
            self.scenario.name, latencies, end - start, (cpu_start, cpu_end), errors=errors
        )


def _summarize(
    name: str,
    latencies: list[float],
    elapsed: float,
    cpu: tuple[CpuSample, CpuSample],
    *,
    errors: int,
) -> RoundResult:
    n = len(latencies)
    latencies.sort()

    def percentile_ms(q: float) -> float:
        return latencies[min(n - 1, int(q * n))] * 1000 if n else math.nan

    def per_request_us(which: int) -> float | None:
        before, after = cpu[0][which], cpu[1][which]
        if before is None or after is None or not n:
            return None
        return (after - before) / n * 1e6

    return RoundResult(
        scenario=name,
        requests=n,
        seconds=round(elapsed, 4),
        rps=n / elapsed if elapsed > 0 else 0.0,
        p50_ms=percentile_ms(0.50),
        p99_ms=percentile_ms(0.99),
        relay_cpu_us=_or_nan(per_request_us(0)),
        agent_cpu_us=per_request_us(1),
        client_cpu_us=_or_nan(per_request_us(2)),
        errors=errors,
    )


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


# --- orchestration -----------------------------------------------------------------


@dataclass
class Topology:
    """Every process the benchmark started; `close()` stops them all by PID."""

    workdir: Path
    peers: list[Peer] = field(default_factory=list)
    hub: HubProcess | None = None
    scenarios: dict[str, Scenario] = field(default_factory=dict)

    def spawn(self, name: str, *args: str) -> Peer:
        """Start a `_relay_peers.py` process and register it for `close()`."""
        with _signals_deferred():
            peer = spawn_peer(name, self.workdir, *args)
            self.peers.append(peer)
        return peer

    def start_hub(self) -> HubProcess:
        """Start `tetherbed hub` (it never queues: max_concurrent > in flight)."""
        with _signals_deferred():
            self.hub = start_hub(
                self.workdir / "hub-state", args=["--max-concurrent", str(HUB_MAX_CONCURRENT)]
            )
        return self.hub

    def close(self) -> None:
        # Agents first, so that their relays see an orderly close.
        for peer in sorted(self.peers, key=lambda p: not p.name.startswith("agent")):
            peer.stop()
        if self.hub is not None:
            self.hub.stop()

    def describe(self) -> Iterator[str]:
        for peer in self.peers:
            yield f"{peer.name} pid {peer.pid}"
        if self.hub is not None:
            yield f"hub pid {self.hub.process.pid}"


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until a child is started *and* registered, so none leaks."""
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, lambda n, _: caught.append(n)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if caught:
        raise KeyboardInterrupt


def build_topology(wanted: list[str], topology: Topology) -> None:
    """Start the processes the wanted scenarios need and wait until all are ready."""
    echo = topology.spawn("echo", "echo") if "echo" in wanted else None
    minimal = topology.spawn("minimal", "minimal") if "minimal" in wanted else None
    if "hub" in wanted:  # blocks until the hub listens; the peers start meanwhile
        topology.start_hub()
    if echo is not None:
        url = _url_of(wait_announced(echo))
        topology.scenarios["echo"] = Scenario("echo", url, {}, echo.pid, None, "FILE_STAT")
    if minimal is not None:
        url = _url_of(wait_announced(minimal))
        topology.scenarios["minimal"] = _behind_relay(topology, "minimal", url, minimal.pid)
    if topology.hub is not None:
        hub = topology.hub
        agent_token, client_token = hub.token("bench", "agent"), hub.token("bench", "client")
        topology.scenarios["hub"] = _behind_relay(
            topology,
            "hub",
            hub.url,
            hub.process.pid,
            agent_token=agent_token,
            client_token=client_token,
        )


def _behind_relay(
    topology: Topology,
    name: str,
    base_url: str,
    relay_pid: int,
    *,
    agent_token: str = "none",
    client_token: str = "none",
) -> Scenario:
    """Connect a fake agent to the relay at `base_url`; the scenario's client URL."""
    session = str(uuid.uuid4())
    agent = topology.spawn(
        f"agent-{name}",
        *("agent", "--url", base_url, "--session", session, "--token", agent_token),
    )
    wait_announced(agent)
    return Scenario(
        name,
        f"{base_url}/v1/sessions/{session}/client",
        {"Authorization": f"Bearer {client_token}"},
        relay_pid,
        agent.pid,
        "FILE_STAT_RESPONSE",
    )


async def run_rounds(
    topology: Topology, args: argparse.Namespace, progress: Callable[[str], None]
) -> dict[str, list[RoundResult]]:
    """Interleave the scenarios, rotating their order every round.

    SIGINT/SIGTERM cancel this coroutine, so that every connection is closed
    before the processes are stopped.
    """
    loop = asyncio.get_running_loop()
    this = asyncio.current_task()
    assert this is not None
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, this.cancel)
    names = [n for n in SCENARIOS if n in topology.scenarios]
    spec = LoadSpec(args.in_flight, args.frame_size, args.warmup, args.seconds, args.requests)
    results: dict[str, list[RoundResult]] = {n: [] for n in names}
    for round_no in range(args.rounds):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            result = await load_round(topology.scenarios[name], spec)
            results[name].append(result)
            progress(
                f"round {round_no + 1}/{args.rounds} {name:8s} {result.rps:9,.0f} req/s  "
                f"p50 {result.p50_ms:6.2f} ms  p99 {result.p99_ms:6.2f} ms  "
                f"relay CPU {result.relay_cpu_us:6.1f} µs/req"
                + (f"  errors {result.errors}" if result.errors else "")
            )
    return results


# --- reporting ----------------------------------------------------------------------


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def medians(rounds: list[RoundResult]) -> dict[str, Any]:
    return {
        "rps": _median([r.rps for r in rounds]),
        "p50_ms": _median([r.p50_ms for r in rounds]),
        "p99_ms": _median([r.p99_ms for r in rounds]),
        "relay_cpu_us": _median([r.relay_cpu_us for r in rounds]),
        "agent_cpu_us": _median([r.agent_cpu_us for r in rounds]),
        "client_cpu_us": _median([r.client_cpu_us for r in rounds]),
        "requests": sum(r.requests for r in rounds),
        "errors": sum(r.errors for r in rounds),
    }


def ratios(summary: dict[str, dict[str, Any]]) -> dict[str, float]:
    found: dict[str, float] = {}
    if "hub" in summary and "echo" in summary:
        found["relay/echo"] = summary["hub"]["rps"] / summary["echo"]["rps"]
    if "hub" in summary and "minimal" in summary:
        found["hub_cpu/minimal_cpu"] = (
            summary["hub"]["relay_cpu_us"] / summary["minimal"]["relay_cpu_us"]
        )
        found["hub_rps/minimal_rps"] = summary["hub"]["rps"] / summary["minimal"]["rps"]
    if "hub" in summary:
        found["hub p99"] = summary["hub"]["p99_ms"]
    return found


def render(
    summary: dict[str, dict[str, Any]],
    found: dict[str, float],
    args: argparse.Namespace,
    load_before: float,
) -> str:
    window = f"{args.requests} requests" if args.requests else f"{args.seconds:g} s"
    lines = [
        f"relay benchmark: {args.frame_size}-byte FILE_STAT, {args.in_flight} in flight, "
        f"median of {args.rounds} interleaved rounds of {window} (+{args.warmup:g} s warm-up)",
        f"machine: {os.cpu_count()} CPUs, 1-min load average {load_before:.2f} before the run "
        "(anything else running skews every number)",
        "",
        f"{'scenario':<10}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'relay CPU µs/req':>19}",
    ]
    for name, row in summary.items():
        note = "  (echo server)" if name == "echo" else ""
        if row["errors"]:
            note += f"  {row['errors']} ERRORS"
        lines.append(
            f"{name:<10}{row['rps']:>10,.0f}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}"
            f"{row['relay_cpu_us']:>19.1f}{note}"
        )
    lines.append("")
    for name, target in TARGETS.items():
        if name not in found:
            continue
        value = found[name]
        verdict = "PASS" if target.met(value) else "MISS"
        shown = f"{name} = {value:.2f}{target.unit}"
        lines.append(f"{shown:<30}target {target.op} {target.bound:.2f}{target.unit}  {verdict}")
    return "\n".join(lines)


def as_json(
    results: dict[str, list[RoundResult]],
    summary: dict[str, dict[str, Any]],
    found: dict[str, float],
    args: argparse.Namespace,
    load_before: float,
) -> str:
    document = {
        "config": {
            "rounds": args.rounds,
            "seconds": args.seconds,
            "requests": args.requests,
            "warmup": args.warmup,
            "in_flight": args.in_flight,
            "frame_size": args.frame_size,
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
        },
        "scenarios": {
            name: {"median": summary[name], "rounds": [asdict(r) for r in rounds]}
            for name, rounds in results.items()
        },
        "ratios": found,
        "targets": {
            name: {
                "op": target.op,
                "bound": target.bound,
                "value": found.get(name),
                "pass": target.met(found[name]) if name in found else None,
            }
            for name, target in TARGETS.items()
        },
    }
    return json.dumps(_without_nan(document), indent=2, allow_nan=False)


def _without_nan(value: Any) -> Any:
    """NaN (no sample) becomes null, which JSON can carry."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nan(v) for v in value]
    return value


# --- command line ---------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Hub relay throughput, latency and CPU against an echo server and a "
        "minimal aiohttp relay, measured in the same run."
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per scenario")
    parser.add_argument("--seconds", type=float, default=1.5, help="measured window per round")
    parser.add_argument(
        "--requests", type=int, default=None, help="measure this many requests instead"
    )
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds before measuring")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--frame-size", type=int, default=192)
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated subset of: " + ", ".join(SCENARIOS),
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(wanted) - set(SCENARIOS))
    if unknown or not wanted:
        parser.error(f"unknown scenarios {unknown}; choose from {', '.join(SCENARIOS)}")
    if args.rounds < 1 or args.in_flight < 1 or args.seconds <= 0 or args.warmup < 0:
        parser.error("--rounds and --in-flight must be >= 1, --seconds > 0, --warmup >= 0")
    if args.requests is not None and args.requests < 1:
        parser.error("--requests must be >= 1")
    args.wanted = wanted
    return args


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM outside the event loop: unwind like Ctrl-C, through the cleanup."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    load_before = os.getloadavg()[0]

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="tetherbed-bench-") as workdir:
        topology = Topology(Path(workdir))
        try:
            build_topology(args.wanted, topology)
            progress("started: " + ", ".join(topology.describe()))
            results = uvloop.run(run_rounds(topology, args, progress))
        except (KeyboardInterrupt, asyncio.CancelledError):
            progress("interrupted")
            return 130
        except (RuntimeError, OSError, ConnectionClosed) as exc:
            progress(f"benchmark failed: {exc}")
            return 1
        finally:
            # No second signal may cut the cleanup short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            topology.close()
    summary = {name: medians(rounds) for name, rounds in results.items()}
    found = ratios(summary)
    if args.json:
        print(as_json(results, summary, found, args, load_before))
    else:
        print(render(summary, found, args, load_before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
