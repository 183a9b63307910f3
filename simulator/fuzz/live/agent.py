"""Live fuzzing of a local-executor agent: Tetherbed plays the hub it dials.

The agent is any command template (docs/targets.md), Tetherbed's own by default. It
dials the conformance suite's scripted platform, which grants it `files` only (no
shell, no computer use, no local LLM), and serves a private root. A second agent
process serves another session beside it.

Each example sends a short sequence of frames on the agent's data connection:
requests of the spec that read (FILE_READ, FILE_STAT, FILE_LIST), requests whose
capability was not granted, PING, unknown types, and near-valid frames of any of
them — ids from a small pool, so duplicates and reuse happen. Requests that change
the machine (writes, deletes, moves, commands) are never sent: an agent under test
might execute them, and a fuzzer must not depend on its jail being right. Judged:

- every frame with a readable id gets exactly one terminal answer under that id,
  within the deadline, of a type the spec allows for it (or ERROR, with a code the
  spec or docs/spec-notes.md names); a frame of another major may go unanswered;
- the connection is still usable afterwards (PING gets PONG), the agent has not
  exited, and the other agent still answers PING.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tetherbed.simulator.conformance.agent.environment import MACHINE, REFERENCE_DATA, Workspace
from tetherbed.simulator.conformance.agent.platform import (
    AckPolicy,
    AgentConnection,
    ScriptedPlatform,
)
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.processes import CaseProcess
from tetherbed.simulator.fuzz.live.background import BackgroundLoop, OnBackgroundLoop, as_sent
from tetherbed.simulator.fuzz.live.profile import Profile
from tetherbed.simulator.fuzz.strategies import local_executor
from tetherbed.simulator.targets import AgentTarget
from tetherbed.wire.catalog import allowed_answers
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.messages import MessageType

ANSWER_DEADLINE = 10.0
STARTUP = 60.0
#: Close codes with which an agent may end a connection that sent it something wrong.
REFUSAL_CLOSES = frozenset({1002, 1003, 1007, 1008, 1009})
KNOWN_CODES = frozenset(map(str, ErrorCode)) | frozenset(map(str, ExtensionCode))
T = MessageType
#: What is sent: reads, requests whose capability is not granted, PING.
SAFE_KINDS: tuple[str, ...] = tuple(
    str(k)
    for k in (
        T.FILE_READ,
        T.FILE_STAT,
        T.FILE_LIST,
        T.SCREENSHOT_REQUEST,
        T.CURSOR_POSITION_REQUEST,
        T.CLIPBOARD_READ,
        T.LOCAL_LLM_COMPLETION,
        T.DIRECTORY_LIST_REQUEST,
        T.PING,
    )
)
#: Envelope breakages sent to an agent (not frames past 16 MiB: a costly profile).
ENVELOPE = tuple(m for m in local_executor.ENVELOPE_MUTATIONS if m not in local_executor.COSTLY)


class AgentFuzzTarget(OnBackgroundLoop):
    kind = "agent"

    def __init__(
        self,
        agent: AgentTarget,
        *,
        profile: Profile,
        defects: Sequence[str] = (),
        loop: BackgroundLoop | None = None,
    ) -> None:
        if agent.is_reference:
            extra = tuple(f for d in defects for f in ("--defect", d))
            agent = AgentTarget.from_command([*REFERENCE_DATA, *extra])
        self.agent = agent
        self.profile = profile
        super().__init__(loop)
        name = "Tetherbed's agent" if "tetherbed" in " ".join(agent.command or ()) else None
        self.description = name or f"agent `{' '.join((agent.command or ('?',))[:4])}`"
        if defects:
            self.description += f" (--defect {' '.join(defects)})"
        self.base = Path(tempfile.mkdtemp(prefix="tetherbed-fuzz-agent-"))
        self.evidence = Evidence()
        self.token = "tok" + secrets.token_hex(20)
        self.platform: ScriptedPlatform | None = None
        self.processes: dict[str, CaseProcess] = {}
        self.connections: dict[str, AgentConnection] = {}
        self.sessions = {
            "a": f"fuzz-a-{secrets.token_hex(4)}",
            "b": f"fuzz-b-{secrets.token_hex(4)}",
        }

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.loop.run(self._start(), STARTUP * 2 + 30)

    async def _start(self) -> None:
        self.platform = ScriptedPlatform(self.evidence, self.token)
        self.platform.policy = AckPolicy(grant={"files"})
        await self.platform.start()
        for name in ("a", "b"):
            await self._launch(name)

    async def _launch(self, name: str) -> None:
        assert self.platform is not None
        old = self.processes.get(name)
        if old is not None:
            await old.stop()
        workspace = Workspace.create(self.base, f"agent-{name}")
        values = {
            "hub_url": self.platform.url,
            "token": self.token,
            "session": self.sessions[name],
            "root": str(workspace.root),
            "machine": MACHINE,
            "name": f"fuzz-{name}",
            "state": str(workspace.state),
            "shell": False,
            "max_concurrent": 4,
        }
        before = len(self.platform.connections)
        self.processes[name] = CaseProcess(
            f"agent-{name}",
            self.agent.argv(values),
            env=self.agent.environment(values),
            log=workspace.logs / "agent.log",
            evidence=self.evidence,
            cwd=workspace.base,
        )
        connection = await self._connection_of(name, before)
        if connection is None:
            tail = self.processes[name].log_tail(10)
            raise RuntimeError(f"the agent did not connect within {STARTUP:g} s\n{tail}")
        self.connections[name] = connection

    async def _connection_of(self, name: str, after: int) -> AgentConnection | None:
        assert self.platform is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STARTUP
        index = after
        while loop.time() < deadline:
            found = await self.platform.next_connection(deadline - loop.time(), after=index)
            if found is None:
                return None
            index += 1
            if found.session == self.sessions[name] and found.ack is not None:
                return found
        return None

    async def _stop(self) -> None:
        for process in self.processes.values():
            await process.stop()
        if self.platform is not None:
            await self.platform.stop()
        import shutil

        shutil.rmtree(self.base, ignore_errors=True)

    # --- what is sent ----------------------------------------------------------------------

    def steps(self) -> st.SearchStrategy[list[local_executor.Frame]]:
        pool = st.lists(local_executor.request_ids, min_size=1, max_size=3, unique=True)

        def build(ids: list[str]) -> st.SearchStrategy[list[local_executor.Frame]]:
            chosen = st.sampled_from(ids)
            one = st.one_of(
                local_executor.frames(SAFE_KINDS, chosen),
                local_executor.near_valid_frames(SAFE_KINDS, chosen, envelope_mutations=ENVELOPE),
            )
            return st.lists(one, min_size=1, max_size=self.profile.max_steps)

        return pool.flatmap(build)

    def step_to_json(self, step: local_executor.Frame) -> dict[str, Any]:
        return step.to_json()

    def step_from_json(self, raw: dict[str, Any]) -> local_executor.Frame:
        return local_executor.Frame.from_json(raw)

    def scenario(self, steps: Sequence[local_executor.Frame]) -> str | None:
        return None

    # --- judging ---------------------------------------------------------------------------

    def check(self, steps: Sequence[local_executor.Frame]) -> list[str]:
        return self.loop.run(self._check(list(steps)), ANSWER_DEADLINE * 3 + STARTUP + 30)

    async def _check(self, steps: list[local_executor.Frame]) -> list[str]:
        for name in ("a", "b"):
            connection = self.connections.get(name)
            if not self.processes[name].alive() or connection is None or connection.socket.closed:
                await self._launch(name)
        connection = self.connections["a"]
        sent = self.evidence.now()
        for step in steps:
            await connection.send(as_sent(step.data))
        problems = await self._answers(connection, steps, sent)
        problems += await self._afterwards()
        return problems

    async def _answers(
        self, connection: AgentConnection, steps: list[local_executor.Frame], sent: float
    ) -> list[str]:
        wanted: dict[str, list[local_executor.Frame]] = {}
        for step in steps:
            if step.request_id is not None and step.kind != "PONG":
                wanted.setdefault(step.request_id, []).append(step)

        def terminal(frame: Any) -> bool:
            return frame.type not in (None, "STATUS", "LOCAL_LLM_COMPLETION_CHUNK")

        loop = asyncio.get_running_loop()
        deadline = loop.time() + ANSWER_DEADLINE
        socket = connection.socket
        while loop.time() < deadline and not socket.closed:
            got = socket.frames(terminal, after=sent)
            counts: dict[Any, int] = {}
            for frame in got:
                counts[_key(frame.id)] = counts.get(_key(frame.id), 0) + 1
            if all(counts.get(rid, 0) >= len(group) for rid, group in wanted.items()):
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.05)
        got = socket.frames(terminal, after=sent)
        problems: list[str] = []
        for rid, group in wanted.items():
            mine = [f for f in got if f.id == rid]
            optional = sum(1 for s in group if s.mutation == local_executor.WRONG_VERSION)
            ended = socket.ending
            if (
                ended is not None
                and ended.code in REFUSAL_CLOSES
                and any(not s.valid for s in group)
            ):
                continue  # refused with a Close that names why: the spec's way too
            if len(mine) < len(group) - optional:
                why = f" (the connection ended {ended.code} {ended.reason})" if ended else ""
                problems += [
                    f"no answer to {s.describe()} within {ANSWER_DEADLINE:g} s{why}"
                    for s in group[len(mine) :]
                ]
            elif len(mine) > len(group):
                problems.append(f"{len(mine)} answers to {len(group)} frame(s) with id {rid!r}")
            allowed = set().union(*(_allowed(s.kind) for s in group))
            for frame in mine:
                if frame.type not in allowed:
                    problems.append(f"id {rid!r} answered {frame.type}, expected {sorted(allowed)}")
                elif frame.type == "ERROR" and frame.payload.get("code") not in KNOWN_CODES:
                    problems.append(f"id {rid!r}: ERROR code {frame.payload.get('code')!r}")
        return problems

    async def _afterwards(self) -> list[str]:
        problems: list[str] = []
        for name in ("a", "b"):
            if not self.processes[name].alive():
                code = self.processes[name].returncode
                problems.append(f"agent {name} exited with status {code}")
                continue
            connection = self.connections[name]
            ending = connection.socket.ending
            if ending is not None and ending.code in REFUSAL_CLOSES:
                await self._launch(name)  # it refused a frame by closing: a new connection
                connection = self.connections[name]
            rid = f"probe-{secrets.token_hex(4)}"
            sent = self.evidence.now()
            await connection.send(connection.envelope("PING", {}, rid))
            answer = await connection.answer_to(rid, timeout=ANSWER_DEADLINE, after=sent)
            if answer is None or answer.type != "PONG":
                where = "the agent fuzzed" if name == "a" else "the other agent"
                got = answer.describe() if answer is not None else "nothing"
                problems.append(f"{where} is not usable afterwards: PING answered {got}")
        return problems


def _key(request_id: Any) -> Any:
    """An id as a dict key: an agent may echo back an id of any JSON kind."""
    return request_id if isinstance(request_id, str | int | float | None) else repr(request_id)


def _allowed(kind: str) -> frozenset[str]:
    if kind == "PING":
        return frozenset({"PONG", "ERROR"})
    allowed = allowed_answers(kind)
    return allowed if allowed is not None else frozenset({"ERROR"})
