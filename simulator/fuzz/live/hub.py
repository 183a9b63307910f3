"""Live fuzzing of a local-executor hub, through the target contract.

The hub is Tetherbed's own (started here, with the defects asked for), a command
Tetherbed starts, or a running service at a URL, exactly as `tetherbed conform hub`
reaches it (docs/targets.md); clients go through the target's client adapter, agents
are the conformance suite's raw agents. Two sessions are set up, each with an agent
that answers every relayed request with a valid answer of its type, and a client.

Each example is a short sequence of steps on session A:

- `client`: a request through the client adapter — a request type of the spec or an
  unknown one, a valid or near-valid payload, ids from a small pool (duplicates and
  reuse). Every request gets exactly one terminal answer under its id within the
  deadline, of a type the spec allows for it or an ERROR whose code is one the
  spec (or docs/spec-notes.md) names;
- `hello`: a fresh agent connection whose first frame is a valid or near-valid
  HELLO. The hub answers within the handshake deadline: HELLO_ACK, or a refusal
  (ERROR and/or a Close); silence on an open connection is a hang;
- `agent`: session A's agent sends a valid or near-valid frame of its own. The hub
  may ignore it or close that connection with a code, never crash.

Afterwards: the hub's process is still running (when Tetherbed started it), session
A still relays a request both ways (the connection is usable), and session B —
another session, untouched by the example — still does. A hub that exited is
restarted for the next example; the example that made it exit is the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.hub.environment import HubEnvironment, build_timings
from tetherbed.simulator.conformance.hub.raw_agent import NOT_REQUESTS, RawAgent, default_hello
from tetherbed.simulator.conformance.recorded_socket import Frame
from tetherbed.simulator.fuzz.live.background import BackgroundLoop, OnBackgroundLoop, as_sent
from tetherbed.simulator.fuzz.live.profile import Profile
from tetherbed.simulator.fuzz.live.runner import TargetGone
from tetherbed.simulator.fuzz.strategies import local_executor
from tetherbed.simulator.fuzz.strategies.from_models import minimal
from tetherbed.simulator.targets import Answer, ConnectionLost, Target, client_adapter
from tetherbed.wire.catalog import ANSWERS, DATA_REQUESTS, allowed_answers
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.messages import PAYLOAD_MODELS, MessageType
from tetherbed.wire.strict import STRICT_MODELS

#: Seconds a sequence's answers may take (a hub's request deadline is longer, but the
#: fuzz agent answers at once: only the hub's own work is waited for).
ANSWER_DEADLINE = 10.0
#: Seconds a hub has to answer a HELLO (the spec's handshake timeout is 10 s).
HELLO_DEADLINE = 12.0
KNOWN_CODES = frozenset(map(str, ErrorCode)) | frozenset(map(str, ExtensionCode))
#: Close codes with which a hub may end a connection that sent something wrong.
REFUSAL_CLOSES = frozenset({1002, 1003, 1007, 1008, 1009, 4426})
_encode = msgspec.json.Encoder().encode
#: What the fuzz client asks for: the data-plane requests, and a few unknown types.
CLIENT_KINDS = (*[str(k) for k in DATA_REQUESTS], "NOT_A_TYPE", "HELLO_ACK", "file_read")


@dataclass(frozen=True, slots=True)
class HubStep:
    #: client, hello or agent.
    via: str
    kind: str
    request_id: str | None
    data: bytes
    mutation: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "via": self.via,
            "kind": self.kind,
            "request_id": self.request_id,
            "data": self.data.decode("utf-8", "surrogateescape"),
            "mutation": self.mutation,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> HubStep:
        return cls(
            raw["via"],
            raw["kind"],
            raw.get("request_id"),
            raw["data"].encode("utf-8", "surrogateescape"),
            raw.get("mutation"),
        )

    def describe(self) -> str:
        return (
            f"{self.via} {self.kind or '?'} id={self.request_id!r} "
            f"{self.mutation or 'valid'}, {len(self.data)} bytes"
        )


def _client_steps(ids: st.SearchStrategy[str]) -> st.SearchStrategy[HubStep]:
    def payload(kind: str) -> st.SearchStrategy[tuple[bytes, str | None]]:
        if kind not in PAYLOAD_MODELS:
            return st.just((b"{}", "unknown_type"))
        valid = local_executor.payloads(kind).map(lambda p: (_encode(p), None))
        if kind not in STRICT_MODELS:
            return valid
        broken = local_executor.near_valid_payloads(kind).map(lambda m: (m.data, m.mutation))
        return st.one_of(valid, broken)

    return st.sampled_from(CLIENT_KINDS).flatmap(
        lambda kind: st.builds(
            lambda rid, made: HubStep("client", kind, rid, made[0], made[1]), ids, payload(kind)
        )
    )


def _hello_steps() -> st.SearchStrategy[HubStep]:
    valid = st.builds(
        lambda hello: HubStep(
            "hello",
            "HELLO",
            "hello-fz",
            local_executor.envelope("HELLO", "hello-fz", _encode(hello)),
        ),
        st.just(default_hello("machine-fz")),
    )
    broken = local_executor.near_valid_frames(("HELLO",), st.just("hello-fz")).map(
        lambda f: HubStep("hello", f.kind, f.request_id, f.data, f.mutation)
    )
    return st.one_of(valid, broken)


def _agent_steps(ids: st.SearchStrategy[str]) -> st.SearchStrategy[HubStep]:
    kinds = tuple(str(k) for k in (*ANSWERS.values(), MessageType.STATUS, MessageType.PONG))
    frames = st.one_of(
        local_executor.frames(kinds, ids),
        local_executor.near_valid_frames(kinds, ids, envelope_mutations=_AGENT_ENVELOPE),
    )
    return frames.map(lambda f: HubStep("agent", f.kind, f.request_id, f.data, f.mutation))


#: What a fuzzed agent frame may break (not its version: a major mismatch is a
#: legitimate reason to end the connection, tried by the HELLO steps).
_AGENT_ENVELOPE = tuple(
    m
    for m in local_executor.ENVELOPE_MUTATIONS
    if m not in local_executor.COSTLY and m != local_executor.WRONG_VERSION
)


class _Session:
    """A session with its answering agent and its client."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.id = f"fuzz-{name}-{secrets.token_hex(4)}"
        self.agent: RawAgent | None = None
        self.client: Any = None
        self.adapter: Any = None
        self.answerer: asyncio.Task[None] | None = None
        self.answers: list[Answer] = []
        self.reader: asyncio.Task[None] | None = None
        self.lost: str | None = None


class HubFuzzTarget(OnBackgroundLoop):
    kind = "hub"

    def __init__(
        self,
        target: Target,
        *,
        profile: Profile,
        reference_args: Sequence[str] = (),
        loop: BackgroundLoop | None = None,
    ) -> None:
        self.target = target
        self.profile = profile
        super().__init__(loop)
        timings, options = build_timings(target.hub.startable, {})
        self.environment = HubEnvironment(
            target,
            options=options,
            timings=timings,
            users=None,
            reference_args=list(reference_args),
        )
        self.description = self.environment.description
        if reference_args:
            self.description += f" ({' '.join(reference_args)})"
        self.evidence = Evidence()
        self.sessions: dict[str, _Session] = {}
        self._numbers = itertools.count(1)
        self._broken = False

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.loop.run(self._start(), 120)

    async def _start(self) -> None:
        await self.environment.start()
        for name in ("a", "b"):
            self.sessions[name] = await self._open_session(name)

    async def _stop(self) -> None:
        for session in self.sessions.values():
            await self._close_session(session)
        await self.environment.stop()

    @property
    def _access(self) -> Any:
        assert self.environment.shared is not None
        return self.environment.shared.access

    def _hub_exit(self) -> int | None:
        shared = self.environment.shared
        process = shared.runner.process if shared is not None else None
        if process is None:
            return None
        proc = getattr(process, "proc", None) or getattr(process, "process", None)
        return proc.poll() if proc is not None else None

    async def _open_session(self, name: str) -> _Session:
        session = _Session(name)
        await self._dial_agent(session)
        session.adapter = client_adapter(self.target.client_adapter, self._access)
        session.client = await asyncio.wait_for(
            session.adapter.open(session.id, self.environment.users[0]), 15
        )
        session.reader = asyncio.ensure_future(self._read_client(session))
        return session

    async def _dial_agent(self, session: _Session) -> None:
        if session.agent is not None:
            await session.agent.shutdown()
        if session.answerer is not None:
            session.answerer.cancel()
        agent = RawAgent(
            self.evidence,
            f"agent-{session.name}#{next(self._numbers)}",
            url=self._access.url,
            token=self._access.tokens.get(self.environment.users[0], "agent"),
            session=session.id,
            machine=f"machine-{session.name}",
            ssl_context=self._access.ssl,
        )
        answer = await agent.connect()
        if answer is None or answer.type != "HELLO_ACK":
            raise RuntimeError(f"the hub did not accept a valid HELLO: {answer}")
        session.agent = agent
        session.answerer = asyncio.ensure_future(self._answer_requests(agent))

    async def _answer_requests(self, agent: RawAgent) -> None:
        """Answer every relayed request at once, with the least valid answer of its type."""
        answered: set[int] = set()
        assert agent.socket is not None
        while not agent.socket.closed:
            for frame in agent.requests():
                if id(frame) in answered:
                    continue
                answered.add(id(frame))
                await agent.answer(frame, _least_answer(frame))
            async with agent.socket._changed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await agent.socket._changed.wait()

    async def _read_client(self, session: _Session) -> None:
        try:
            while True:
                session.answers.append(await session.client.receive())
        except ConnectionLost as exc:
            session.lost = str(exc) or "the client connection was lost"
        except Exception as exc:  # an adapter's own failure: the connection is unusable
            session.lost = f"{type(exc).__name__}: {exc}"

    async def _close_session(self, session: _Session) -> None:
        for task in (session.answerer, session.reader):
            if task is not None:
                task.cancel()
        if session.agent is not None:
            with contextlib.suppress(Exception):
                await session.agent.shutdown()
        for closer in (session.client, session.adapter):
            if closer is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closer.close(), 5)

    async def _restart(self) -> None:
        """A new hub instance (a hub that exited), new sessions on it."""
        for session in self.sessions.values():
            await self._close_session(session)
        if self.environment.shared is not None:
            await self.environment.stop_instance(self.environment.shared)
        self.environment.shared = await self.environment.start_instance("restart-")
        for name in ("a", "b"):
            self.sessions[name] = await self._open_session(name)

    # --- what is sent ----------------------------------------------------------------------

    def steps(self) -> st.SearchStrategy[list[HubStep]]:
        pool = st.lists(local_executor.request_ids, min_size=1, max_size=3, unique=True)

        def build(ids: list[str]) -> st.SearchStrategy[list[HubStep]]:
            chosen = st.sampled_from(ids)
            one = st.one_of(_client_steps(chosen), _hello_steps(), _agent_steps(chosen))
            return st.lists(one, min_size=1, max_size=self.profile.max_steps)

        return pool.flatmap(build)

    def step_to_json(self, step: HubStep) -> dict[str, Any]:
        return step.to_json()

    def step_from_json(self, raw: dict[str, Any]) -> HubStep:
        return HubStep.from_json(raw)

    def scenario(self, steps: Sequence[HubStep]) -> str | None:
        return None  # scenario steps send well-formed requests only (docs/fuzzing.md)

    # --- judging ---------------------------------------------------------------------------

    def check(self, steps: Sequence[HubStep]) -> list[str]:
        return self.loop.run(self._check(list(steps)), ANSWER_DEADLINE + HELLO_DEADLINE * 8 + 120)

    async def _check(self, steps: list[HubStep]) -> list[str]:
        if self._broken or self._hub_exit() is not None:
            if not self.target.hub.startable:
                raise TargetGone("the hub at the URL stopped answering")
            await self._restart()
            self._broken = False
        try:
            return await self._run(steps)
        except Exception as exc:  # the hub went away under us: say how
            self._broken = True
            for _ in range(50):
                code = self._hub_exit()
                if code is not None:
                    return [f"the hub exited with status {code} (during {steps[-1].describe()})"]
                await asyncio.sleep(0.1)
            return [f"the hub stopped answering: {type(exc).__name__}: {exc}"]

    async def _run(self, steps: list[HubStep]) -> list[str]:
        if any(s.lost for s in self.sessions.values()):
            await self._restart()
        session = self.sessions["a"]
        session.answers.clear()
        problems: list[str] = []
        client_steps = []
        for step in steps:
            if step.via == "client":
                client_steps.append(step)
                await session.client.send(step.request_id, step.kind, step.data)
            elif step.via == "hello":
                problems += await self._hello(step)
            else:
                problems += await self._agent_frame(session, step)
            code = self._hub_exit()
            if code is not None:
                return [*problems, f"the hub exited with status {code} after {step.describe()}"]
        problems += await self._client_answers(session, client_steps)
        code = self._hub_exit()
        if code is not None:
            return [*problems, f"the hub exited with status {code}"]
        problems += await self._afterwards()
        return problems

    async def _hello(self, step: HubStep) -> list[str]:
        agent = RawAgent(
            self.evidence,
            f"hello#{next(self._numbers)}",
            url=self._access.url,
            token=self._access.tokens.get(self.environment.users[0], "agent"),
            session=f"fuzz-hello-{secrets.token_hex(4)}",
            machine="machine-fz",
            ssl_context=self._access.ssl,
        )
        try:
            await agent.open()
        except Exception as exc:
            return [f"{step.describe()}: the hub refused the upgrade ({exc})"]
        assert agent.socket is not None
        try:
            sent = self.evidence.now()
            await agent.socket.send(as_sent(step.data))
            answer = await agent.socket.wait_for(
                lambda f: f.type != "PING", HELLO_DEADLINE, after=sent
            )
            if answer is None:
                ending = agent.socket.ending
                if ending is None:
                    if self._hub_exit() is not None:
                        return []  # judged by the caller: the hub exited
                    return [f"{step.describe()}: no answer within {HELLO_DEADLINE:g} s (a hang)"]
                if (
                    ending.code is not None
                    and ending.code not in REFUSAL_CLOSES
                    and (ending.by != "them" or ending.code == 1011)
                ):
                    return [
                        f"{step.describe()}: the connection ended {ending.code} {ending.reason}"
                    ]
                return []
            return _judge_hello_answer(step, answer)
        finally:
            await agent.shutdown()

    async def _agent_frame(self, session: _Session, step: HubStep) -> list[str]:
        assert session.agent is not None and session.agent.socket is not None
        await session.agent.socket.send(as_sent(step.data))
        await asyncio.sleep(0.02)
        ending = session.agent.socket.ending
        if ending is not None:
            if ending.code not in REFUSAL_CLOSES and self._hub_exit() is None:
                return [f"{step.describe()}: the hub ended the agent's connection {ending.code}"]
            await self._dial_agent(session)  # a refusal with a code: dial again
        return []

    async def _client_answers(self, session: _Session, steps: list[HubStep]) -> list[str]:
        wanted: dict[Any, int] = {}
        for step in steps:
            wanted[step.request_id] = wanted.get(step.request_id, 0) + 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ANSWER_DEADLINE
        while loop.time() < deadline and session.lost is None:
            got: dict[Any, int] = {}
            for answer in session.answers:
                got[answer.request_id] = got.get(answer.request_id, 0) + 1
            if all(got.get(rid, 0) >= n for rid, n in wanted.items()):
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)  # a second answer to one id would come now
        problems: list[str] = []
        pending = list(session.answers)
        for rid, count in wanted.items():
            mine = [a for a in pending if a.request_id == rid]
            for answer in mine:
                pending.remove(answer)
            group = [s for s in steps if s.request_id == rid]
            if len(mine) < count:
                why = f" ({session.lost})" if session.lost else ""
                problems += [
                    f"no answer to {s.describe()} within {ANSWER_DEADLINE:g} s{why}"
                    for s in group[len(mine) :]
                ]
            elif len(mine) > count:
                problems.append(f"{len(mine)} answers to {count} request(s) with id {rid!r}")
            kinds = set().union(*(_allowed(s.kind) for s in group))
            for answer in mine:
                problems += _judge_client_answer(rid, answer, kinds)
        for extra in pending:
            if extra.request_id is not None:
                problems.append(f"an answer to nothing sent: {extra.kind} id={extra.request_id!r}")
        return problems

    async def _afterwards(self) -> list[str]:
        problems: list[str] = []
        for session in self.sessions.values():
            if session.agent is None or session.agent.socket is None or session.agent.socket.closed:
                await self._dial_agent(session)
            problem = await self._probe(session)
            if problem is not None:
                where = "the session fuzzed" if session.name == "a" else "another session"
                problems.append(f"{where} is not usable afterwards: {problem}")
        return problems

    async def _probe(self, session: _Session) -> str | None:
        if session.lost is not None:
            return f"its client connection ended: {session.lost}"
        rid = f"probe-{next(self._numbers)}"
        before = len(session.answers)
        await session.client.send(rid, "FILE_STAT", b'{"path":"/srv/conform/x"}')
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ANSWER_DEADLINE
        while loop.time() < deadline and session.lost is None:
            for answer in session.answers[before:]:
                if answer.request_id == rid:
                    if answer.kind != "FILE_STAT_RESPONSE":
                        return f"FILE_STAT answered {answer.kind} {answer.payload[:120]!r}"
                    return None
            await asyncio.sleep(0.02)
        return f"no answer to FILE_STAT within {ANSWER_DEADLINE:g} s"


#: Any answer kind: a request whose answer the spec does not define (the reserved
#: recording messages) is relayed back whatever it is.
ANY_ANSWER = "*"


def _allowed(kind: str) -> frozenset[str]:
    if kind in PAYLOAD_MODELS and allowed_answers(kind) is None and kind in DATA_REQUESTS:
        return frozenset({ANY_ANSWER})
    allowed = allowed_answers(kind)
    return allowed if allowed is not None else frozenset({"ERROR"})


def _least_answer(frame: Frame) -> Any:
    kind = ANSWERS.get(frame.type)  # type: ignore[call-overload]
    if kind is None:
        return {
            "code": "INTERNAL_ERROR",
            "message": "not answered by the fuzz agent",
            "fatal": False,
        }
    return minimal(STRICT_MODELS.get(kind, PAYLOAD_MODELS[kind]))


def _judge_client_answer(rid: Any, answer: Answer, kinds: set[str]) -> list[str]:
    if answer.kind not in kinds and ANY_ANSWER not in kinds:
        return [f"id {rid!r} answered {answer.kind}, expected one of {sorted(kinds)}"]
    if answer.kind == "ERROR":
        try:
            code = msgspec.json.decode(answer.payload).get("code")
        except (msgspec.MsgspecError, AttributeError):
            return [f"id {rid!r}: an ERROR whose payload is not an object"]
        if code not in KNOWN_CODES:
            return [f"id {rid!r}: ERROR code {code!r} is not one the spec or its notes name"]
    return []


def _judge_hello_answer(step: HubStep, answer: Frame) -> list[str]:
    if answer.type == "HELLO_ACK":
        return []
    if answer.type == "ERROR":
        code = answer.payload.get("code")
        if code not in KNOWN_CODES:
            return [f"{step.describe()}: refused with an unknown code {code!r}"]
        return []
    if answer.type in NOT_REQUESTS:
        return []
    return [f"{step.describe()}: the hub answered HELLO with {answer.describe()}"]
