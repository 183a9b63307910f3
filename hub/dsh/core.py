"""The dsh-computers hub as a sans-I/O state machine.

Drivers report what happened (a request on a route, a stream opened or
closed, a write that failed, a timer) and carry out the actions returned:
SSE bytes to push, streams to end, store changes to apply in one transaction,
execution output and outcomes for whoever waits on them. The core reads no
clock of its own (a `Clock` is passed in), draws randomness from `entropy`,
and never touches a socket or the database.

What it owns:
- enrollment (single-use keys with a TTL, tokens kept as digests) — `Registry`;
- presence: a computer is online exactly while it holds an open stream; a
  second stream replaces the first; rename pushes `config`, delete ends the
  stream; a ping every `heartbeatMs` is the write that finds a half-dead peer;
- exec and file dispatch over the stream, with deadlines, cancellation, and
  results that arrive as separate POSTs (chunks reassembled in `seq` order);
- background jobs (§11.2) and promotion at timeout (§11.6.3).
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tetherbed.hub.dsh import bodies, tools
from tetherbed.hub.dsh.actions import (
    DshAction,
    End,
    Output,
    Persist,
    Push,
    PutComputer,
    Settled,
    Stream,
    ToolError,
)
from tetherbed.hub.dsh.chunks import Chunk, ChunkAssembler, Verdict
from tetherbed.hub.dsh.config import DshConfig
from tetherbed.hub.dsh.jobs import Job, OutputRing
from tetherbed.hub.dsh.records import Computer, PendingKey, iso
from tetherbed.hub.dsh.registry import Enrolled, Registry
from tetherbed.hub.timers import Timers
from tetherbed.runtime.clock import Clock
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh import schema
from tetherbed.wire.dsh.sse import encode_event

T = C.ToolErrorCode
E = C.ErrorCode

#: The version the hub reports (§4.8) and compares agents with (§11.1 drift).
HUB_VERSION = C.SPEC_VERSION
#: §11.5: what this hub's `hello` advertises.
FEATURES = (C.Feature.STREAM, C.Feature.FS)


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: status and JSON body."""

    status: int
    body: dict[str, Any]


def error(status: int, code: str, message: str) -> Answer:
    return Answer(status, {"error": code, "message": message})


OK = Answer(200, {"ok": True})
Outcome = tuple[Answer, list[DshAction]]


def version_tuple(text: str) -> tuple[int, ...] | None:
    """ "1.3.0+tetherbed.0.1.0" -> (1, 3, 0); None when it is not a version."""
    core = text.split("+", 1)[0].split("-", 1)[0].strip().lstrip("v")
    try:
        parts = tuple(int(p) for p in core.split("."))
    except ValueError:
        return None
    return parts or None


@dataclass(eq=False, slots=True)
class Execution:
    request_id: str
    user: str
    computer_id: str
    command: str
    started_at: float
    #: Monotonic deadline: a foreground watcher's timeout, or for a job the
    #: agent's own kill time plus grace.
    deadline: float
    assembler: ChunkAssembler
    #: The output so far, bounded (§11.2: the host keeps the tail even for a
    #: foreground call); a job promoted at timeout starts from it.
    ring: OutputRing
    #: A foreground caller waits for Settled (False once promoted to a job).
    watched: bool = True
    job: Job | None = None
    #: Set while the computer has no stream: give up at this time.
    orphan_deadline: float | None = None


@dataclass(eq=False, slots=True)
class FsRequest:
    request_id: str
    user: str
    computer_id: str
    op: str
    deadline: float
    orphan_deadline: float | None = None


@dataclass(slots=True)
class _Counters:
    enrolled: int = 0
    streams_opened: int = 0
    streams_replaced: int = 0
    executions: int = 0
    chunks_duplicate: int = 0
    chunks_refused: int = 0


TimerOwner = Stream | Execution | FsRequest


@dataclass(slots=True)
class _Ids:
    entropy: Callable[[int], bytes]

    def make(self, prefix: str) -> str:
        return prefix + self.entropy(8).hex()


class DshHubCore:
    def __init__(
        self,
        config: DshConfig,
        clock: Clock,
        *,
        entropy: Callable[[int], bytes] = secrets.token_bytes,
        computers: Iterable[Computer] = (),
        keys: Iterable[PendingKey] = (),
    ) -> None:
        self.config = config
        self.clock = clock
        self.registry = Registry(config, entropy, computers, keys)
        self.streams: dict[str, Stream] = {}
        self.executions: dict[str, Execution] = {}
        self.fs_requests: dict[str, FsRequest] = {}
        self.jobs: dict[str, Job] = {}
        self.timers: Timers[TimerOwner] = Timers(self._due)
        self.counters = _Counters()
        self._ids = _Ids(entropy)
        self._stream_numbers = itertools.count(1)
        self._heartbeat_s = config.heartbeat_ms / 1000
        self._presence_from_heartbeat = "presence_from_heartbeat" in config.defects
        self._out_of_order = "chunks_out_of_order" in config.defects

    # === presence ===========================================================

    def online(self, computer: Computer) -> bool:
        """§2: online exactly while the computer holds an open stream."""
        if self._presence_from_heartbeat:
            seen = computer.last_seen_at
            return seen is not None and self.clock.time() - seen < 1.5 * self._heartbeat_s
        return computer.id in self.streams

    def visible(self, user: str) -> list[Computer]:
        """The user's computers, without never-activated ones (§11.6.4)."""
        return [
            c
            for c in self.registry.of_user(user)
            if c.activated_at is not None or not self.config.hide_unactivated
        ]

    def open_stream(self, token: str | None) -> tuple[Stream | Answer, list[DshAction]]:
        """GET /agent/events. A newer stream for a computer replaces the older."""
        computer = self.registry.authenticate(token)
        if computer is None:
            return error(401, E.INVALID_TOKEN, "unknown or revoked agent token"), []
        now = self.clock.monotonic()
        wall = self.clock.time()
        actions: list[DshAction] = []
        old = self.streams.get(computer.id)
        if old is not None:
            actions.append(End(old, "replaced by a newer stream of the same computer"))
            self.counters.streams_replaced += 1
        stream = Stream(
            next(self._stream_numbers), computer.id, now, next_ping_at=now + self._heartbeat_s
        )
        self.streams[computer.id] = stream
        self.counters.streams_opened += 1
        self.timers.arm(stream)
        computer.last_seen_at = wall
        if computer.activated_at is None:
            computer.activated_at = wall
        actions.append(Persist((PutComputer(computer),)))
        hello = {
            "computerId": computer.id,
            "name": computer.name,
            "heartbeatMs": self.config.heartbeat_ms,
            "capabilities": list(tools.capabilities_of(computer)),
            "features": list(FEATURES),
        }
        actions.append(Push(stream, encode_event(C.Event.HELLO, hello)))
        stream.hello_sent = True
        for pending in self._pending_on(computer.id):
            pending.orphan_deadline = None
            self.timers.arm(pending)
        return stream, actions

    def stream_closed(self, stream: Stream) -> list[DshAction]:
        """The stream's response ended (peer gone, a write failed, or we ended it)."""
        if self.streams.get(stream.computer_id) is not stream:
            return []
        del self.streams[stream.computer_id]
        computer = self.registry.computers.get(stream.computer_id)
        actions: list[DshAction] = []
        if computer is not None:
            computer.last_seen_at = self.clock.time()
            actions.append(Persist((PutComputer(computer),)))
        # Whatever was sent over it may still finish (results are separate
        # POSTs); wait one heartbeat for the agent to come back.
        orphaned_at = self.clock.monotonic() + self._heartbeat_s
        for pending in self._pending_on(stream.computer_id):
            pending.orphan_deadline = orphaned_at
            self.timers.arm(pending)
        return actions

    def _pending_on(self, computer_id: str) -> list[Execution | FsRequest]:
        found: list[Execution | FsRequest] = [
            e for e in self.executions.values() if e.computer_id == computer_id
        ]
        found += [r for r in self.fs_requests.values() if r.computer_id == computer_id]
        return found

    # === agent routes =======================================================

    def enroll(self, value: Any, server_url: str) -> Outcome:
        try:
            request = bodies.parse_enroll(value)
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        outcome, changes = self.registry.enroll(request, self.clock.time())
        if not isinstance(outcome, Enrolled):
            return error(outcome.status, outcome.error, outcome.message), []
        self.counters.enrolled += 1
        actions: list[DshAction] = [Persist(tuple(changes))]
        if outcome.replaced:
            old = self.streams.get(outcome.computer.id)
            if old is not None:
                actions.append(End(old, "the computer was enrolled again"))
        computer = outcome.computer
        body = {
            "computerId": computer.id,
            "token": outcome.token,
            "name": computer.name,
            "serverUrl": server_url,
        }
        return Answer(200, body), actions

    def heartbeat(self, token: str | None, value: Any) -> Outcome:
        computer = self.registry.authenticate(token)
        if computer is None:
            return error(401, E.INVALID_TOKEN, "unknown or revoked agent token"), []
        try:
            beat = bodies.parse_heartbeat(value)
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        now = self.clock.time()
        computer.last_seen_at = now
        if beat.cpu_model is not None:
            computer.cpu_model = beat.cpu_model
        if beat.memory_bytes is not None:
            computer.memory_bytes = beat.memory_bytes
        if beat.agent_version is not None:
            computer.agent_version = beat.agent_version
        if beat.capabilities is not None:
            computer.capabilities = beat.capabilities
            computer.capabilities_updated_at = now
        if beat.workspace_base is not None:
            computer.workspace_base = beat.workspace_base
        answer = Answer(200, {"ok": True, "name": computer.name})
        return answer, [Persist((PutComputer(computer),))]

    def result(self, token: str | None, value: Any) -> Outcome:
        """POST /agent/results: the authoritative end of an execution."""
        computer = self.registry.authenticate(token)
        if computer is None:
            return error(401, E.INVALID_TOKEN, "unknown or revoked agent token"), []
        try:
            request_id, result = bodies.parse_result(value, self.config.max_output_bytes)
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        execution = self.executions.get(request_id)
        if execution is None or execution.computer_id != computer.id:
            return _unknown_request(request_id), []
        computer.last_seen_at = self.clock.time()
        value_out = self._exec_value(execution, computer, result)
        return OK, self._settle_exec(execution, value=value_out)

    def chunk(self, token: str | None, value: Any) -> Outcome:
        """POST /agent/results/chunk: in `seq` order, duplicates dropped."""
        computer = self.registry.authenticate(token)
        if computer is None:
            return error(401, E.INVALID_TOKEN, "unknown or revoked agent token"), []
        try:
            body = bodies.parse_chunk(value)
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        execution = self.executions.get(body.request_id)
        if execution is None or execution.computer_id != computer.id:
            return _unknown_request(body.request_id), []
        chunk = Chunk(body.seq, body.stdout, body.stderr, body.heartbeat)
        verdict, ready = execution.assembler.add(chunk)
        if verdict is Verdict.DUPLICATE:
            self.counters.chunks_duplicate += 1
        elif verdict is Verdict.REFUSED:
            self.counters.chunks_refused += 1
        actions: list[DshAction] = []
        for piece in ready:
            for name, data in (("stdout", piece.stdout), ("stderr", piece.stderr)):
                if not data:
                    continue
                execution.ring.append(data)
                if execution.watched:
                    actions.append(Output(execution.request_id, name, data))
        return OK, actions

    def fs_result(self, token: str | None, value: Any) -> Outcome:
        computer = self.registry.authenticate(token)
        if computer is None:
            return error(401, E.INVALID_TOKEN, "unknown or revoked agent token"), []
        try:
            request_id, result = bodies.parse_fs_result(value)
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        pending = self.fs_requests.get(request_id)
        if pending is None or pending.computer_id != computer.id:
            return _unknown_request(request_id), []
        del self.fs_requests[request_id]
        return OK, [Settled(request_id, value=result)]

    # === browser routes =====================================================

    def state(self, user: str, server_url: str) -> dict[str, Any]:
        now = self.clock.time()
        pending = self.registry.pending_key(user, now)
        pending_view = None
        if pending is not None and pending.key is not None:
            pending_view = {
                "key": pending.key,
                "expiresAt": iso(pending.expires_at),
                "os": pending.os,
            }
        return {
            "version": C.STATE_VERSION,
            "serverUrl": server_url,
            "heartbeatMs": self.config.heartbeat_ms,
            "computers": [self._computer_view(c) for c in self.visible(user)],
            "pendingKey": pending_view,
            "role": self.config.role,
        }

    def _computer_view(self, computer: Computer) -> dict[str, Any]:
        online = self.online(computer)
        version = version_tuple(computer.agent_version)
        minimum = version_tuple(self.config.min_agent_version) or (0,)
        return {
            "id": computer.id,
            "name": computer.name,
            "hostname": computer.hostname,
            "os": computer.os,
            "platformLabel": computer.platform_label,
            "online": online,
            "lastSeenAt": iso(computer.last_seen_at),
            "createdAt": iso(computer.created_at),
            "agentVersion": computer.agent_version,
            "cpuModel": computer.cpu_model,
            "memoryBytes": computer.memory_bytes,
            "bots": {"used": 1 if online else 0, "total": 1},
            "capabilities": list(tools.capabilities_of(computer)),
            "workspaceBase": computer.workspace_base,
            "drift": version != version_tuple(HUB_VERSION),
            "updateRequired": version is not None and version < minimum,
        }

    def create_key(self, user: str, value: Any, server_url: str) -> Outcome:
        try:
            request = bodies.parse_create_key(value)
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        key, record, changes = self.registry.create_key(user, request, self.clock.time())
        install = f"{server_url}{C.url(C.Route.JOIN_SH)}?key={key}"
        windows = f"{server_url}{C.url(C.Route.JOIN_PS1)}?key={key}"
        body = {
            "key": key,
            "os": request.os,
            "expiresAt": iso(record.expires_at),
            "serverUrl": server_url,
            "command": f"curl -fsSL '{install}' | sh",
            "windowsCommand": f"irm '{windows}' | iex",
            "installUrl": install,
        }
        return Answer(200, body), [Persist(tuple(changes))]

    def key_status(self, user: str, key: object) -> Answer:
        record = self.registry.key_for(user, key)
        computer = None
        if record is not None and record.computer_id:
            computer = self.registry.computers.get(record.computer_id)
        online = computer is not None and self.online(computer)
        status = self.registry.key_status(record, self.clock.time(), online)
        view = None
        if computer is not None:
            view = {"id": computer.id, "name": computer.name, "online": online}
        return Answer(200, {"status": status, "computer": view})

    def rename(self, user: str, value: Any) -> Outcome:
        try:
            body = bodies.check(value, schema.RENAME)
            name = bodies.display_name(body["name"])
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        computer = self.registry.owned(user, body["id"])
        if computer is None:
            return error(404, E.NOT_FOUND, f"no computer {body['id']!r}"), []
        actions: list[DshAction] = [Persist(tuple(self.registry.rename(computer, name)))]
        stream = self.streams.get(computer.id)
        if stream is not None:
            data = {"name": name, "execEnabled": self.config.exec_enabled}
            actions.append(Push(stream, encode_event(C.Event.CONFIG, data)))
        return Answer(200, {"ok": True, "name": name}), actions

    def delete(self, user: str, value: Any) -> Outcome:
        """§4.4 / §11.6.6: end the live stream, drop the record, kill the token."""
        try:
            body = bodies.check(value, schema.DELETE)
        except bodies.BadRequest as exc:
            return error(400, E.BAD_REQUEST, str(exc)), []
        computer = self.registry.owned(user, body["id"])
        if computer is None:
            return error(404, E.NOT_FOUND, f"no computer {body['id']!r}"), []
        actions: list[DshAction] = []
        stream = self.streams.pop(computer.id, None)
        if stream is not None:
            actions.append(End(stream, "the computer was deleted"))
        gone = ToolError(T.WENT_OFFLINE, f"computer {computer.name!r} was deleted", 409)
        for pending in self._pending_on(computer.id):
            actions += self._fail(pending, gone)
        actions.append(Persist(tuple(self.registry.drop(computer.id))))
        return OK, actions

    def health(self) -> dict[str, Any]:
        computers = list(self.registry.computers.values())
        return {
            "ok": True,
            "version": HUB_VERSION,
            "computers": len(computers),
            "online": sum(1 for c in computers if self.online(c)),
        }

    def join_refusal(self, key: object) -> str | None:
        """Why join.sh is refused for this key (410 with a short text), or None."""
        refused = self.registry.key_refusal(key, self.clock.time())
        return refused.message if refused is not None else None

    # === model tools ========================================================

    def computer_list(self, user: str) -> dict[str, Any]:
        rows = [tools.summary(c, self.online(c), iso(c.last_seen_at)) for c in self.visible(user)]
        return {"computers": rows}

    def tool_names(self, user: str) -> list[str]:
        return tools.offered(self.visible(user))

    def pick(self, user: str, query: str | None, capability: str) -> Computer | ToolError:
        """A computer the call may use: resolved, online, capable and current."""
        computers = self.visible(user)
        if query is None:
            capable = [
                c for c in computers if self.online(c) and capability in tools.capabilities_of(c)
            ]
            if len(capable) != 1:
                listed = ", ".join(c.name for c in capable) or "none"
                return ToolError(
                    T.UNKNOWN_COMPUTER,
                    f"pass `computer`: {len(capable)} connected computers support this "
                    f"({listed}); run computer_list",
                    400 if capable else 409,
                )
            return capable[0]
        found = tools.resolve(computers, query)
        if isinstance(found, ToolError):
            return found
        if not self.online(found):
            return ToolError(
                T.OFFLINE, f"computer '{found.name}' is offline; run computer_list", 409
            )
        if capability not in tools.capabilities_of(found):
            what = "file access" if capability == C.Capability.FS else f"`{capability}`"
            return ToolError(
                T.UNSUPPORTED,
                f"this machine's agent does not support {what} (upgrade the agent on "
                f"'{found.name}')",
                409,
            )
        version = version_tuple(found.agent_version)
        minimum = version_tuple(self.config.min_agent_version) or (0,)
        if version is not None and version < minimum:
            return ToolError(
                T.UPDATE_REQUIRED,
                f"upgrade this computer's agent: '{found.name}' runs {found.agent_version}, "
                f"this hub needs {self.config.min_agent_version} or newer",
                409,
            )
        return found

    def start_exec(
        self,
        user: str,
        computer_query: str,
        command: str,
        *,
        cwd: str | None = None,
        timeout_ms: float | None = None,
        background: bool = False,
    ) -> tuple[Execution | ToolError, list[DshAction]]:
        if not self.config.exec_enabled:
            return ToolError(T.EXEC_DISABLED, "command execution is disabled on this hub", 403), []
        computer = self.pick(user, computer_query, C.Capability.EXEC)
        if isinstance(computer, ToolError):
            return computer, []
        stream = self.streams.get(computer.id)
        if stream is None:  # presence_from_heartbeat: "online" without a stream
            return ToolError(
                T.OFFLINE, f"computer '{computer.name}' is offline; run computer_list", 409
            ), []
        timeout = int(timeout_ms) if timeout_ms and timeout_ms > 0 else self.config.exec_timeout_ms
        may_promote = background or self.config.promote_on_timeout
        agent_timeout = max(self.config.background_timeout_ms, timeout) if may_promote else timeout
        now = self.clock.monotonic()
        grace = self.config.result_grace_ms / 1000
        if background:
            deadline = now + agent_timeout / 1000 + grace
        elif may_promote:
            deadline = now + timeout / 1000
        else:
            deadline = now + timeout / 1000 + grace
        request_id = self._ids.make(C.EXEC_REQUEST_PREFIX)
        execution = Execution(
            request_id,
            user,
            computer.id,
            command,
            now,
            deadline,
            ChunkAssembler(self.config.max_buffered_chunks, self._out_of_order),
            OutputRing(self.config.job_ring_bytes),
            watched=not background,
        )
        if background:
            execution.job = self._new_job(execution, computer)
        self.executions[request_id] = execution
        self.timers.arm(execution)
        self.counters.executions += 1
        event = {
            "requestId": request_id,
            "command": command,
            "cwd": cwd,
            "timeoutMs": agent_timeout,
            "shell": "sh",
        }
        # §11.5: only an agent that reported capabilities (v1.3) gets v1.3 fields.
        if computer.capabilities is not None:
            event["stream"] = True
        return execution, [Push(stream, encode_event(C.Event.EXEC, event))]

    def _new_job(self, execution: Execution, computer: Computer) -> Job:
        job = Job(
            id=self._ids.make(C.JOB_ID_PREFIX),
            user=execution.user,
            label=f"{computer.name}: {execution.command}"[:200],
            request_id=execution.request_id,
            computer_id=computer.id,
            computer_name=computer.name,
            command=execution.command,
            started_at=self.clock.time(),
            ring=execution.ring,
        )
        self.jobs[job.id] = job
        return job

    def cancel_exec(self, user: str, request_id: str, message: str = "aborted") -> list[DshAction]:
        """§5.2 exec.signal: send `cancel` and settle the call as aborted."""
        execution = self.executions.get(request_id)
        if execution is None or execution.user != user:
            return []
        actions = self._push_cancel(execution)
        actions += self._fail(execution, ToolError(T.ABORTED, message, 409))
        return actions

    def _push_cancel(self, execution: Execution) -> list[DshAction]:
        stream = self.streams.get(execution.computer_id)
        if stream is None:
            return []
        data = {"requestId": execution.request_id}
        return [Push(stream, encode_event(C.Event.CANCEL, data))]

    def job_view(self, user: str, job_id: object, since: int = 0) -> dict[str, Any] | ToolError:
        job = self.jobs.get(job_id) if isinstance(job_id, str) else None
        if job is None or job.user != user:
            return ToolError(T.UNKNOWN_JOB, f"no background job {job_id!r}", 404)
        return job.view(since)

    def kill_job(self, user: str, job_id: object) -> tuple[dict[str, Any] | ToolError, list]:
        job = self.jobs.get(job_id) if isinstance(job_id, str) else None
        if job is None or job.user != user:
            return ToolError(T.UNKNOWN_JOB, f"no background job {job_id!r}", 404), []
        actions: list[DshAction] = []
        execution = self.executions.get(job.request_id)
        if execution is not None:
            actions += self._push_cancel(execution)
            job.killed = True
            actions += self._fail(execution, ToolError(T.ABORTED, "killed by job_kill", 409))
        return job.view(), actions

    def start_fs(
        self, user: str, computer_query: str | None, request: dict[str, Any]
    ) -> tuple[FsRequest | ToolError, Computer | None, list[DshAction]]:
        computer = self.pick(user, computer_query, C.Capability.FS)
        if isinstance(computer, ToolError):
            return computer, None, []
        stream = self.streams.get(computer.id)
        if stream is None:
            return ToolError(T.OFFLINE, f"computer '{computer.name}' is offline", 409), None, []
        request_id = self._ids.make(C.FS_REQUEST_PREFIX)
        deadline = self.clock.monotonic() + (C.FS_TIMEOUT_MS + self.config.result_grace_ms) / 1000
        pending = FsRequest(request_id, user, computer.id, request["op"], deadline)
        self.fs_requests[request_id] = pending
        self.timers.arm(pending)
        event = {"requestId": request_id, **request}
        return pending, computer, [Push(stream, encode_event(C.Event.FS, event))]

    # === settling ===========================================================

    def _exec_value(
        self, execution: Execution, computer: Computer, result: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "computer": {"id": computer.id, "name": computer.name},
            "command": execution.command,
            "exitCode": result["exitCode"],
            "signal": result["signal"],
            "stdout": result["stdout"],
            "stderr": result["stderr"],
            "durationMs": result["durationMs"],
            "ok": result["ok"],
            "timedOut": result["timedOut"],
            "truncated": result["truncated"],
            "error": result["error"],
        }

    def _settle_exec(
        self,
        execution: Execution,
        *,
        value: dict[str, Any] | None = None,
        failure: ToolError | None = None,
    ) -> list[DshAction]:
        self.executions.pop(execution.request_id, None)
        if execution.job is not None:
            execution.job.finish(value, failure.message if failure else None, self.clock.time())
        if execution.watched:
            execution.watched = False
            return [Settled(execution.request_id, value=value, error=failure)]
        return []

    def _fail(self, pending: Execution | FsRequest, failure: ToolError) -> list[DshAction]:
        if isinstance(pending, Execution):
            return self._settle_exec(pending, failure=failure)
        self.fs_requests.pop(pending.request_id, None)
        return [Settled(pending.request_id, error=failure)]

    # === timers =============================================================

    @staticmethod
    def _due(owner: TimerOwner) -> float | None:
        if isinstance(owner, Stream):
            return owner.next_ping_at
        if owner.orphan_deadline is not None:
            return min(owner.deadline, owner.orphan_deadline)
        return owner.deadline

    def next_deadline(self) -> float | None:
        return self.timers.next_deadline()

    def on_timer(self) -> list[DshAction]:
        now = self.clock.monotonic()
        actions: list[DshAction] = []
        for owner in list(self.timers.expired(now)):
            if isinstance(owner, Stream):
                actions += self._ping(owner, now)
            elif isinstance(owner, Execution):
                actions += self._exec_due(owner, now)
            elif self.fs_requests.get(owner.request_id) is owner:
                actions += self._fs_due(owner, now)
        return actions

    def _ping(self, stream: Stream, now: float) -> list[DshAction]:
        if self.streams.get(stream.computer_id) is not stream:
            return []
        stream.next_ping_at = now + self._heartbeat_s
        self.timers.arm(stream)
        data = {"t": int(self.clock.time() * 1000)}
        return [Push(stream, encode_event(C.Event.PING, data))]

    def _exec_due(self, execution: Execution, now: float) -> list[DshAction]:
        if self.executions.get(execution.request_id) is not execution:
            return []
        computer = self.registry.computers.get(execution.computer_id)
        name = computer.name if computer else execution.computer_id
        if execution.orphan_deadline is not None and now >= execution.orphan_deadline:
            return self._fail(
                execution,
                ToolError(
                    T.WENT_OFFLINE,
                    f"computer '{name}' went offline while running the command; whether it "
                    "finished is unknown",
                    409,
                ),
            )
        if now < execution.deadline:
            return []
        if execution.watched and execution.job is None and self.config.promote_on_timeout:
            # §11.6.3: adopt instead of killing.
            if computer is None:
                return self._fail(execution, ToolError(T.WENT_OFFLINE, "computer is gone", 409))
            job = self._new_job(execution, computer)
            execution.job = job
            execution.watched = False
            grace = self.config.result_grace_ms / 1000
            execution.deadline = (
                execution.started_at + self.config.background_timeout_ms / 1000 + grace
            )
            self.timers.arm(execution)
            value = {
                "jobId": job.id,
                "promoted": True,
                "command": execution.command,
                "computer": {"id": execution.computer_id, "name": name},
            }
            return [Settled(execution.request_id, value=value)]
        elapsed = now - execution.started_at
        actions = self._push_cancel(execution)
        actions += self._fail(
            execution,
            ToolError(
                T.TIMEOUT,
                f"the command on '{name}' did not finish within {elapsed:.0f} s and was cancelled",
                504,
            ),
        )
        return actions

    def _fs_due(self, pending: FsRequest, now: float) -> list[DshAction]:
        if pending.orphan_deadline is not None and now >= pending.orphan_deadline:
            return self._fail(pending, ToolError(T.WENT_OFFLINE, "the computer went offline", 409))
        if now < pending.deadline:
            return []
        return self._fail(
            pending,
            ToolError(
                T.TIMEOUT,
                f"the file operation did not answer within {C.FS_TIMEOUT_MS // 1000} s",
                504,
            ),
        )

    def shutdown(self) -> list[DshAction]:
        """End every stream (the hub is stopping)."""
        actions: list[DshAction] = [End(s, "hub shutting down") for s in self.streams.values()]
        self.streams.clear()
        return actions


def _unknown_request(request_id: str) -> Answer:
    return error(
        404, E.UNKNOWN_REQUEST, f"request {request_id!r} is not pending (settled or timed out)"
    )
