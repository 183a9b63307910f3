"""The dsh-computers agent as a sans-I/O state machine.

The driver reports what happened — the stream opened (with its HTTP status),
an SSE event arrived, the stream ended, a process wrote output or exited, a
POST was answered (or failed), a file operation finished, time passed — and
carries out the actions returned. The core never sleeps, reads no clock but
the one it is given, and draws jitter from the `random` it is given, so the
simulator can run it in virtual time and replay it from a seed.

Rules it owns:
- the stream's life: one stream at a time; `hello` makes it live; a stream
  silent for longer than `SILENCE_FACTOR` heartbeats is given up (the agent's
  own guard against a half-dead connection); reconnects follow the spec's
  backoff (`wire/dsh/backoff.py`), reset once a stream stayed healthy; a 401
  stops the agent (its token is revoked: enroll again);
- exec: spawn, a deadline, cancel, each output stream capped at 1 MiB and
  marked truncated; with `stream: true` (and a hub whose hello advertised
  "stream") output is POSTed in seq-numbered chunks at most every 100 ms or
  32 KiB, one in flight at a time, with a heartbeat frame after 10 s of
  silence; the final result is POSTed after the last chunk;
- file operations (run by the driver, answered here), heartbeats, `config`;
- POSTs that fail on the network or with 5xx/408/429 are retried a few times
  (the hub drops duplicate chunks and answers a duplicate result 404).
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tetherbed.runtime.clock import Clock
from tetherbed.wire.dsh import backoff, schema
from tetherbed.wire.dsh import constants as C

#: Give up on a stream that has said nothing for this many heartbeats.
SILENCE_FACTOR = 2.5
#: Before `hello` tells the heartbeat, wait this long for it.
HELLO_TIMEOUT_S = 30.0
MAX_RUNNING_COMMANDS = 16
MAX_RUNNING_FILE_OPS = 8
#: Retries of a POST after the first attempt, with delays 0.5 s · 2^k.
POST_RETRIES = 5
POST_RETRY_BASE_S = 0.5
_RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})

AGENT_DEFECTS = frozenset(
    {
        # Reconnect at once, always: no backoff.
        "reconnect_immediately",
        # Ignore `cancel` events.
        "ignore_cancel",
        # Send every chunk with seq 0.
        "constant_seq",
        # Number chunks from 1 instead of 0 (§11.2).
        "seq_from_one",
    }
)


# --- actions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenStream:
    generation: int


@dataclass(frozen=True, slots=True)
class CloseStream:
    generation: int


@dataclass(frozen=True, slots=True)
class SendPost:
    post_id: int
    path: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Spawn:
    request_id: str
    command: str
    cwd: str | None
    shell: str


@dataclass(frozen=True, slots=True)
class Kill:
    request_id: str


@dataclass(frozen=True, slots=True)
class RunFs:
    request_id: str
    request: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Renamed:
    name: str


@dataclass(frozen=True, slots=True)
class Log:
    level: str  # "debug" | "info" | "warning" | "error"
    message: str


@dataclass(frozen=True, slots=True)
class Stopped:
    exit_code: int
    reason: str


Action = OpenStream | CloseStream | SendPost | Spawn | Kill | RunFs | Renamed | Log | Stopped


class Phase(Enum):
    IDLE = "idle"
    CONNECTING = "connecting"
    STREAMING = "streaming"
    WAITING = "waiting"  # backing off before the next attempt
    STOPPED = "stopped"


#: Exit codes of `run` (and of `Stopped`).
EXIT_OK = 0
EXIT_TOKEN_REFUSED = 3


# --- internal state ------------------------------------------------------------


@dataclass(slots=True)
class _Capture:
    """One output stream of a command, capped."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def add(self, chunk: bytes) -> bytes:
        """Keep what fits; return the part kept (what may be streamed)."""
        room = self.limit - len(self.data)
        if room <= 0:
            self.truncated = self.truncated or bool(chunk)
            return b""
        kept = chunk[:room]
        if len(chunk) > room:
            self.truncated = True
        self.data += kept
        return kept

    def text(self) -> str:
        text = self.data.decode("utf-8", "replace")
        return text + C.TRUNCATION_MARKER if self.truncated else text


@dataclass(slots=True)
class _Exec:
    request_id: str
    command: str
    started_at: float
    deadline: float
    stdout: _Capture
    stderr: _Capture
    streaming: bool
    seq: int = 0
    batch_out: bytearray = field(default_factory=bytearray)
    batch_err: bytearray = field(default_factory=bytearray)
    last_flush_at: float = -1e9
    last_output_at: float = 0.0
    chunk_in_flight: bool = False
    stream_dead: bool = False
    exited: bool = False
    exit_code: int | None = None
    signal: str | None = None
    error: str | None = None
    timed_out: bool = False
    cancelled: bool = False
    finished_at: float = 0.0
    result_sent: bool = False


@dataclass(slots=True)
class _Post:
    post_id: int
    path: str
    body: dict[str, Any]
    request_id: str | None = None
    kind: str = ""  # "chunk" | "result" | "fs" | "heartbeat"
    attempts: int = 0
    retry_at: float | None = None


@dataclass(slots=True)
class AgentSettings:
    computer_id: str
    name: str
    capabilities: tuple[str, ...] = (C.Capability.EXEC, C.Capability.FS)
    metadata: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    max_output_bytes: int = C.MAX_OUTPUT_BYTES
    #: "split": §11.2 `{stdout, stderr}` chunks; "typed": §11.6.2 `{type, data}`.
    chunk_format: str = "split"
    defects: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.defects) - AGENT_DEFECTS
        if unknown:
            raise ValueError(f"unknown dsh agent defects {sorted(unknown)}")
        if self.chunk_format not in ("split", "typed"):
            raise ValueError("chunk_format is 'split' or 'typed'")


class AgentCore:
    def __init__(self, settings: AgentSettings, clock: Clock, rng: random.Random) -> None:
        self.settings = settings
        self.clock = clock
        self.rng = rng
        self.phase = Phase.IDLE
        self.name = settings.name
        self.generation = 0
        self.attempt = 0
        #: Delays chosen so far (the simulator's backoff checker reads them).
        self.delays: list[float] = []
        self.heartbeat_s = C.HEARTBEAT_MS / 1000
        self.features: frozenset[str] = frozenset()
        self.exec_enabled = True
        self.connected_since: float | None = None
        self.last_error: str | None = None
        self._hello_at: float | None = None
        self._opened_at: float | None = None
        self._last_event_at = 0.0
        self._reconnect_at: float | None = None
        self._heartbeat_at: float | None = None
        self._execs: dict[str, _Exec] = {}
        self._fs_running: set[str] = set()
        self._posts: dict[int, _Post] = {}
        self._post_ids = 0
        self._queued: dict[str, list[_Post]] = {}  # per exec: posts not yet sent

    # === the stream ==========================================================

    def start(self) -> list[Action]:
        if self.phase is not Phase.IDLE:
            return []
        return self._open()

    def _open(self) -> list[Action]:
        self.generation += 1
        self.phase = Phase.CONNECTING
        self._opened_at = self.clock.monotonic()
        self._last_event_at = self._opened_at
        self._hello_at = None
        self._reconnect_at = None
        return [OpenStream(self.generation)]

    def stream_opened(self, generation: int, status: int, message: str = "") -> list[Action]:
        """The events request was answered with `status` (200 starts the stream)."""
        if generation != self.generation or self.phase is not Phase.CONNECTING:
            return []
        if status == 200:
            self._last_event_at = self.clock.monotonic()
            return []
        if status == 401:
            return self._stop(
                EXIT_TOKEN_REFUSED,
                "the hub refused this computer's token (it was deleted or enrolled again); "
                "run `enroll` with a new key",
            )
        return self._lost(f"the hub answered the stream with HTTP {status} {message}".strip())

    def stream_event(self, generation: int, event: str, data: str) -> list[Action]:
        if generation != self.generation or self.phase not in (Phase.CONNECTING, Phase.STREAMING):
            return []
        now = self.clock.monotonic()
        self._last_event_at = now
        try:
            value = json.loads(data) if data else {}
        except ValueError:
            return [Log("warning", f"ignored a {event!r} event whose data is not JSON")]
        if event == C.Event.HELLO:
            return self._hello(value, now)
        if self.phase is not Phase.STREAMING:
            return [Log("warning", f"ignored {event!r} before hello")]
        if event == C.Event.EXEC:
            return self._exec(value, now)
        if event == C.Event.CANCEL:
            return self._cancel(value)
        if event == C.Event.PING:
            return []
        if event == C.Event.CONFIG:
            return self._config(value)
        if event == C.Event.FS:
            return self._fs(value)
        return [Log("debug", f"ignored unknown event {event!r}")]

    def _hello(self, value: Any, now: float) -> list[Action]:
        if schema.problems(value, schema.HELLO, strict=False):
            return [Log("warning", "ignored a hello without a computerId")]
        heartbeat = value.get("heartbeatMs")
        if isinstance(heartbeat, int) and heartbeat > 0:
            self.heartbeat_s = heartbeat / 1000
        features = value.get("features")
        if isinstance(features, list):
            self.features = frozenset(f for f in features if isinstance(f, str))
        else:
            self.features = frozenset()
        name = value.get("name")
        actions: list[Action] = []
        if isinstance(name, str) and name and name != self.name:
            self.name = name
            actions.append(Renamed(name))
        first = self.phase is not Phase.STREAMING
        self.phase = Phase.STREAMING
        self._hello_at = now
        self.connected_since = self.clock.time()
        self.last_error = None
        if first:
            actions.append(Log("info", f"connected as {self.name} ({value['computerId']})"))
        # Report capabilities and metadata on every new stream (§11.1, §11.6.1).
        self._heartbeat_at = now + self.heartbeat_s
        actions += self._send(self._heartbeat_post(), now)
        return actions + self._due_posts(now)

    def stream_lost(self, generation: int, reason: str) -> list[Action]:
        """The stream ended or could not be opened (network, EOF, bad framing)."""
        if generation != self.generation or self.phase not in (Phase.CONNECTING, Phase.STREAMING):
            return []
        return self._lost(reason)

    def _lost(self, reason: str) -> list[Action]:
        now = self.clock.monotonic()
        healthy = self._hello_at is not None and now - self._hello_at >= C.RECONNECT_HEALTHY_AFTER_S
        if healthy:
            self.attempt = 0
        if "reconnect_immediately" in self.settings.defects:
            delay = 0.0
        else:
            delay = backoff.delay(self.attempt, self.rng.random())
        self.attempt += 1
        self.delays = [*self.delays[-99:], delay]
        self.phase = Phase.WAITING
        self.connected_since = None
        self.last_error = reason
        self._hello_at = None
        self._heartbeat_at = None
        self._reconnect_at = now + delay
        return [
            CloseStream(self.generation),
            Log("warning", f"stream lost ({reason}); reconnecting in {delay:.1f} s"),
        ]

    def _stop(self, code: int, reason: str) -> list[Action]:
        self.phase = Phase.STOPPED
        self.connected_since = None
        self.last_error = reason
        actions: list[Action] = [CloseStream(self.generation), Log("error", reason)]
        actions += [Kill(rid) for rid, e in self._execs.items() if not e.exited]
        return [*actions, Stopped(code, reason)]

    def shutdown(self) -> list[Action]:
        """Stop for good (SIGTERM): close the stream, kill running commands."""
        if self.phase is Phase.STOPPED:
            return []
        self.phase = Phase.STOPPED
        actions: list[Action] = [CloseStream(self.generation)]
        actions += [Kill(rid) for rid, e in self._execs.items() if not e.exited]
        return [*actions, Stopped(EXIT_OK, "stopped")]

    # === exec ================================================================

    def _exec(self, value: Any, now: float) -> list[Action]:
        if schema.problems(value, schema.EXEC, strict=False):
            return [Log("warning", "ignored an exec without requestId and command")]
        request_id = value["requestId"]
        if request_id in self._execs:
            return [Log("debug", f"ignored a repeated exec {request_id}")]
        timeout = value.get("timeoutMs")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            timeout_s = timeout / 1000
        else:
            timeout_s = C.EXEC_TIMEOUT_MS / 1000
        limit = self.settings.max_output_bytes
        streaming = value.get("stream") is True and C.Feature.STREAM in self.features
        execution = _Exec(
            request_id,
            value["command"],
            now,
            now + timeout_s,
            _Capture(limit),
            _Capture(limit),
            streaming,
            last_output_at=now,
        )
        refusal = None
        if not self.exec_enabled:
            refusal = "command execution is disabled by the hub"
        elif sum(1 for e in self._execs.values() if not e.exited) >= MAX_RUNNING_COMMANDS:
            refusal = f"agent busy: {MAX_RUNNING_COMMANDS} commands are already running"
        self._execs[request_id] = execution
        if refusal is not None:
            execution.exited = True
            execution.error = refusal
            execution.finished_at = now
            return self._finish(execution, now)
        cwd = value.get("cwd") if isinstance(value.get("cwd"), str) else None
        shell = value.get("shell") if isinstance(value.get("shell"), str) else "sh"
        return [Spawn(request_id, execution.command, cwd, shell)]

    def _cancel(self, value: Any) -> list[Action]:
        if "ignore_cancel" in self.settings.defects:
            return []
        request_id = value.get("requestId") if isinstance(value, dict) else None
        execution = self._execs.get(request_id) if isinstance(request_id, str) else None
        if execution is None or execution.exited:
            return []
        execution.cancelled = True
        return [Kill(execution.request_id), Log("info", f"cancelled {request_id}")]

    def _config(self, value: Any) -> list[Action]:
        actions: list[Action] = []
        if isinstance(value, dict):
            if isinstance(value.get("execEnabled"), bool):
                self.exec_enabled = value["execEnabled"]
            name = value.get("name")
            if isinstance(name, str) and name and name != self.name:
                self.name = name
                actions += [Renamed(name), Log("info", f"renamed to {name}")]
        return actions

    def process_output(self, request_id: str, stream: str, data: bytes) -> list[Action]:
        execution = self._execs.get(request_id)
        if execution is None or execution.exited or not data:
            return []
        capture = execution.stdout if stream == "stdout" else execution.stderr
        kept = capture.add(data)
        now = self.clock.monotonic()
        execution.last_output_at = now
        if execution.streaming and kept and not execution.stream_dead:
            (execution.batch_out if stream == "stdout" else execution.batch_err).extend(kept)
            return self._maybe_flush(execution, now)
        return []

    def process_exited(
        self,
        request_id: str,
        exit_code: int | None,
        signal: str | None = None,
        error: str | None = None,
    ) -> list[Action]:
        execution = self._execs.get(request_id)
        if execution is None or execution.exited:
            return []
        now = self.clock.monotonic()
        execution.exited = True
        execution.exit_code = exit_code
        execution.signal = signal
        execution.error = error
        execution.finished_at = now
        if execution.cancelled and execution.error is None:
            execution.error = "cancelled"
        return self._finish(execution, now)

    def _finish(self, execution: _Exec, now: float) -> list[Action]:
        actions = self._flush(execution, now, final=True) if execution.streaming else []
        return actions + self._send_result_when_ready(execution, now)

    def _send_result_when_ready(self, execution: _Exec, now: float) -> list[Action]:
        if (
            execution.result_sent
            or execution.chunk_in_flight
            or self._queued.get(execution.request_id)
        ):
            return []
        execution.result_sent = True
        body = {
            "requestId": execution.request_id,
            "ok": execution.exit_code == 0 and not execution.timed_out and execution.error is None,
            "exitCode": execution.exit_code,
            "signal": execution.signal,
            "stdout": execution.stdout.text(),
            "stderr": execution.stderr.text(),
            "durationMs": round((execution.finished_at - execution.started_at) * 1000),
            "truncated": execution.stdout.truncated or execution.stderr.truncated,
            "timedOut": execution.timed_out,
            "error": execution.error,
        }
        post = self._new_post(C.url(C.Route.RESULTS), body, "result", execution.request_id)
        return self._send(post, now)

    # --- chunks ------------------------------------------------------------

    def _maybe_flush(self, execution: _Exec, now: float) -> list[Action]:
        size = len(execution.batch_out) + len(execution.batch_err)
        if execution.chunk_in_flight or size == 0:
            return []
        if size >= C.CHUNK_BATCH_BYTES or now - execution.last_flush_at >= C.CHUNK_BATCH_MS / 1000:
            return self._flush(execution, now)
        return []

    def _flush(self, execution: _Exec, now: float, *, final: bool = False) -> list[Action]:
        """Turn the batch into chunk POSTs (queued behind one in flight)."""
        out, err = bytes(execution.batch_out), bytes(execution.batch_err)
        execution.batch_out.clear()
        execution.batch_err.clear()
        if execution.stream_dead or (not out and not err):
            return self._send_next_chunk(execution, now)
        bodies: list[dict[str, Any]] = []
        if self.settings.chunk_format == "typed":
            bodies += [{"type": "stdout", "data": _b64(out)}] if out else []
            bodies += [{"type": "stderr", "data": _b64(err)}] if err else []
        else:
            bodies.append({"stdout": _b64(out), "stderr": _b64(err)})
        queue = self._queued.setdefault(execution.request_id, [])
        for part in bodies:
            queue.append(self._chunk_post(execution, part))
        execution.last_flush_at = now
        return self._send_next_chunk(execution, now)

    def _chunk_post(self, execution: _Exec, part: dict[str, Any]) -> _Post:
        seq = 0 if "constant_seq" in self.settings.defects else execution.seq
        if "seq_from_one" in self.settings.defects:
            seq += 1
        execution.seq += 1
        body = {"requestId": execution.request_id, "seq": seq, **part}
        return self._new_post(C.url(C.Route.RESULTS_CHUNK), body, "chunk", execution.request_id)

    def _send_next_chunk(self, execution: _Exec, now: float) -> list[Action]:
        queue = self._queued.get(execution.request_id)
        if execution.chunk_in_flight or not queue:
            if not queue:
                self._queued.pop(execution.request_id, None)
            return []
        post = queue.pop(0)
        if not queue:
            self._queued.pop(execution.request_id, None)
        execution.chunk_in_flight = True
        return self._send(post, now)

    def _heartbeat_frame(self, execution: _Exec, now: float) -> list[Action]:
        execution.last_output_at = now
        if execution.chunk_in_flight or execution.stream_dead:
            return []
        # Both chunk formats send it as §11.6.2's typed frame: §11.2's shape
        # has no way to say "no output, still alive".
        part = {"type": "heartbeat", "data": ""}
        self._queued.setdefault(execution.request_id, []).append(self._chunk_post(execution, part))
        return self._send_next_chunk(execution, now)

    # === file operations =====================================================

    def _fs(self, value: Any) -> list[Action]:
        if schema.problems(value, schema.FS_REQUEST, strict=False):
            return [Log("warning", "ignored an fs event without requestId and op")]
        request_id = value["requestId"]
        if request_id in self._fs_running:
            return []
        if len(self._fs_running) >= MAX_RUNNING_FILE_OPS:
            busy = {
                "ok": False,
                "op": value["op"],
                "path": value.get("path", ""),
                "error": f"agent busy: {MAX_RUNNING_FILE_OPS} file operations are running",
            }
            return self.fs_finished(request_id, busy)
        self._fs_running.add(request_id)
        return [RunFs(request_id, value)]

    def fs_finished(self, request_id: str, result: dict[str, Any]) -> list[Action]:
        self._fs_running.discard(request_id)
        body = {"requestId": request_id, **result}
        post = self._new_post(C.url(C.Route.FS_RESULT), body, "fs", request_id)
        return self._send(post, self.clock.monotonic())

    # === POSTs ===============================================================

    def _new_post(
        self, path: str, body: dict[str, Any], kind: str, request_id: str | None
    ) -> _Post:
        self._post_ids += 1
        return _Post(self._post_ids, path, body, request_id, kind)

    def _send(self, post: _Post, now: float) -> list[Action]:
        post.attempts += 1
        post.retry_at = None
        self._posts[post.post_id] = post
        return [SendPost(post.post_id, post.path, post.body)]

    def post_answered(self, post_id: int, status: int | None, body: Any = None) -> list[Action]:
        """A POST ended: `status` None means it failed on the network."""
        post = self._posts.get(post_id)
        if post is None or post.retry_at is not None:
            return []
        now = self.clock.monotonic()
        if (status is None or status in _RETRYABLE) and post.attempts <= POST_RETRIES:
            post.retry_at = now + POST_RETRY_BASE_S * 2 ** (post.attempts - 1)
            return [Log("debug", f"{post.kind} POST failed ({status or 'network'}); retrying")]
        del self._posts[post_id]
        actions: list[Action] = []
        if status is None or status >= 400:
            level = "debug" if status == 404 else "warning"
            actions.append(Log(level, f"{post.kind} POST for {post.request_id} gave {status}"))
        if post.kind == "heartbeat" and status == 200 and isinstance(body, dict):
            name = body.get("name")
            if isinstance(name, str) and name and name != self.name:
                self.name = name
                actions += [Renamed(name), Log("info", f"renamed to {name}")]
        if post.kind == "chunk" and post.request_id in self._execs:
            execution = self._execs[post.request_id]
            execution.chunk_in_flight = False
            if status == 404 or status is None or status >= 400:
                # The hub is done with it (or gave up): stream no more.
                execution.stream_dead = True
                self._queued.pop(execution.request_id, None)
            actions += self._send_next_chunk(execution, now)
            if execution.exited:
                actions += self._send_result_when_ready(execution, now)
            else:
                actions += self._maybe_flush(execution, now)
        if post.kind == "result" and post.request_id is not None:
            self._execs.pop(post.request_id, None)
        return actions

    def _due_posts(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for post in list(self._posts.values()):
            if post.retry_at is not None and post.retry_at <= now:
                actions += self._send(post, now)
        return actions

    # === time ================================================================

    def next_deadline(self) -> float | None:
        times: list[float] = []
        if self.phase is Phase.WAITING and self._reconnect_at is not None:
            times.append(self._reconnect_at)
        if self.phase in (Phase.CONNECTING, Phase.STREAMING):
            times.append(self._silence_deadline())
        if self.phase is Phase.STREAMING and self._heartbeat_at is not None:
            times.append(self._heartbeat_at)
        for execution in self._execs.values():
            if not execution.exited:
                times.append(execution.deadline)
                if execution.streaming and not execution.stream_dead:
                    times.append(execution.last_output_at + C.SILENT_HEARTBEAT_MS / 1000)
                    if execution.batch_out or execution.batch_err:
                        times.append(execution.last_flush_at + C.CHUNK_BATCH_MS / 1000)
        times += [p.retry_at for p in self._posts.values() if p.retry_at is not None]
        return min(times) if times else None

    def _silence_deadline(self) -> float:
        if self.phase is Phase.CONNECTING or self._hello_at is None:
            return self._last_event_at + HELLO_TIMEOUT_S
        return self._last_event_at + SILENCE_FACTOR * self.heartbeat_s

    def tick(self) -> list[Action]:
        now = self.clock.monotonic()
        actions: list[Action] = []
        if self.phase is Phase.STOPPED:
            return actions
        if self.phase is Phase.WAITING and self._reconnect_at is not None:
            if now >= self._reconnect_at:
                actions += self._open()
        elif self.phase in (Phase.CONNECTING, Phase.STREAMING) and now >= self._silence_deadline():
            silent = now - self._last_event_at
            actions += self._lost(f"the stream was silent for {silent:.0f} s")
        if (
            self.phase is Phase.STREAMING
            and self._heartbeat_at is not None
            and now >= self._heartbeat_at
        ):
            self._heartbeat_at = now + self.heartbeat_s
            actions += self._send(self._heartbeat_post(), now)
        for execution in list(self._execs.values()):
            if execution.exited:
                continue
            if now >= execution.deadline and not execution.timed_out:
                execution.timed_out = True
                actions.append(Kill(execution.request_id))
                actions.append(Log("info", f"{execution.request_id} timed out; killed"))
            if execution.streaming and not execution.stream_dead:
                if execution.batch_out or execution.batch_err:
                    actions += self._maybe_flush(execution, now)
                elif now - execution.last_output_at >= C.SILENT_HEARTBEAT_MS / 1000:
                    actions += self._heartbeat_frame(execution, now)
        actions += self._due_posts(now)
        return actions

    def _heartbeat_post(self) -> _Post:
        body: dict[str, Any] = {"meta": dict(self.settings.meta)}
        body["capabilities"] = list(self.settings.capabilities)
        if self.settings.metadata:
            body["metadata"] = dict(self.settings.metadata)
        return self._new_post(C.url(C.Route.HEARTBEAT), body, "heartbeat", None)

    # === status ==============================================================

    def status(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "connected": self.phase is Phase.STREAMING,
            "computerId": self.settings.computer_id,
            "name": self.name,
            "attempt": self.attempt,
            "running": sorted(r for r, e in self._execs.items() if not e.exited),
            "lastError": self.last_error,
        }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
