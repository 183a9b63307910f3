"""Live fuzzing of a native automation adapter (crossdesk-automation/1 over stdio).

Tetherbed plays the trusted parent, as the conformance suite does (its
`NativePeer`: JSON lines on stdin and stdout, the password on descriptor 3). Each
example writes a short sequence of request lines — valid ones and near-valid ones,
ids drawn from a small pool so that some are duplicates while in flight and some
are reused — and judges:

- every line gets exactly one answer, under its id (`null` when the id cannot be
  read), within the answer deadline: no hang, nothing answered twice;
- every answer is one JSON object; an error carries the spec's three fields (a code,
  `retryable`, `side_effect_possible`); a near-valid request is never answered `ok`;
- the error is the typed one for what was broken, by Tetherbed's reading of the
  codes (docs/spec-notes.md; `codes="any"` judges only the spec's three fields):
  a line past 64 KiB is REQUEST_TOO_LARGE, nesting past 32 NESTING_TOO_DEEP, ...;
- afterwards the adapter still answers `hello` (the pipe is usable), it has not
  exited, and a second adapter process beside it (another session) still answers.

An adapter that exits is restarted for the next example; the example that made it
exit is the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.native.peer import Line, NativePeer
from tetherbed.simulator.fuzz.live.background import BackgroundLoop, OnBackgroundLoop
from tetherbed.simulator.fuzz.live.profile import Profile
from tetherbed.simulator.fuzz.strategies import crossdesk, mutations
from tetherbed.wire import crossdesk as spec

#: Seconds a sequence's answers may take, all together.
ANSWER_DEADLINE = 10.0

#: Problems after which late answers may still arrive (the next example gets a new process).
UNSETTLING = ("no answer to", "an answer to nothing", "the adapter stopped reading")

#: Tetherbed's reading of which code answers which breakage (the spec names only
#: CONTROL_DENIED; agent/native/errors.py lists the rest).
EXPECTED_CODES: dict[str, frozenset[str]] = {
    crossdesk.TOO_DEEP: frozenset({"NESTING_TOO_DEEP"}),
    mutations.DEEP_NESTING: frozenset({"NESTING_TOO_DEEP"}),
    crossdesk.OVERSIZED_LINE: frozenset({"REQUEST_TOO_LARGE"}),
    crossdesk.NOT_AN_OBJECT: frozenset({"INVALID_REQUEST"}),
    crossdesk.TRUNCATED: frozenset({"INVALID_REQUEST"}),
    crossdesk.LINE_INVALID_UTF8: frozenset({"INVALID_REQUEST"}),
    mutations.INVALID_UTF8: frozenset({"INVALID_REQUEST"}),
    crossdesk.BAD_REQUEST_ID: frozenset({"INVALID_REQUEST"}),
    crossdesk.UNKNOWN_METHOD: frozenset({"UNKNOWN_METHOD", "INVALID_REQUEST"}),
    # A generated request may break a rule no model states (after_frame_id without
    # generation, a coordinate outside the image): refused for that, it is refused.
    mutations.UNKNOWN_FIELD: frozenset({"UNKNOWN_FIELD", "INVALID_ARGUMENT"}),
}
#: The other breakages of a method's arguments.
ARGUMENT_CODES = frozenset({"INVALID_ARGUMENT", "UNKNOWN_FIELD", "DUPLICATE_REQUEST_ID"})


class NativeFuzzTarget(OnBackgroundLoop):
    kind = "native"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        profile: Profile,
        env: dict[str, str] | None = None,
        password: str | None = None,
        codes: str = "tetherbed",
        description: str | None = None,
        loop: BackgroundLoop | None = None,
    ) -> None:
        self.argv = list(argv)
        self.profile = profile
        self.env = dict(env or {})
        self.password = password
        self.codes = codes
        self.description = description or f"adapter `{' '.join(self.argv[:6])}`"
        super().__init__(loop)
        self.folder = Path(tempfile.mkdtemp(prefix="tetherbed-fuzz-native-"))
        self.evidence = Evidence()
        self.peer: NativePeer | None = None
        self.sibling: NativePeer | None = None
        self._numbers = itertools.count(1)
        self._probe_ids = itertools.count(2**40)
        self._unsettled = False

    # --- lifecycle -------------------------------------------------------------------------

    async def _spawn(self, name: str) -> NativePeer:
        peer = NativePeer(
            self.evidence,
            self.argv,
            env=self.env,
            password=self.password,
            log=self.folder / f"{name}-{next(self._numbers)}.log",
            name=name,
        )
        await peer.start()
        return peer

    def start(self) -> None:
        self.peer = self.loop.run(self._spawn("adapter"), 60)
        self.sibling = self.loop.run(self._spawn("sibling"), 60)
        problem = self.loop.run(self._probe(self.peer), 60)
        if problem:
            raise RuntimeError(f"the adapter does not answer hello: {problem}")

    def stop(self) -> None:
        for peer in (self.peer, self.sibling):
            if peer is not None:
                with contextlib.suppress(Exception):
                    self.loop.run(peer.stop(), 30)
        self._close_own_loop()

    # --- what is sent ----------------------------------------------------------------------

    def steps(self) -> st.SearchStrategy[list[crossdesk.RequestLine]]:
        return crossdesk.sequences(max_size=self.profile.max_steps)

    def step_to_json(self, step: crossdesk.RequestLine) -> dict[str, Any]:
        return step.to_json()

    def step_from_json(self, raw: dict[str, Any]) -> crossdesk.RequestLine:
        return crossdesk.RequestLine.from_json(raw)

    def scenario(self, steps: Sequence[crossdesk.RequestLine]) -> str | None:
        return None  # scenarios drive hubs and agents, not native adapters

    # --- judging ---------------------------------------------------------------------------

    def check(self, steps: Sequence[crossdesk.RequestLine]) -> list[str]:
        return self.loop.run(self._check(list(steps)), ANSWER_DEADLINE + 60)

    async def _check(self, steps: list[crossdesk.RequestLine]) -> list[str]:
        assert self.peer is not None
        ended = self.peer.eof or (
            self.peer.proc is not None and self.peer.proc.returncode is not None
        )
        if ended or self._unsettled:
            # Gone, or answers of the last example may still come: a fresh process.
            await self.peer.stop()
            self.peer = await self._spawn("adapter")
            self._unsettled = False
        peer = self.peer
        for old in (peer, self.sibling):
            if old is not None:
                async with old._changed:
                    old.lines.clear()  # the previous example's lines: judged already
        after = self.evidence.now()
        problems: list[str] = []
        for step in steps:
            if not await peer.send_raw(step.data, timeout=ANSWER_DEADLINE):
                problems.append(f"the adapter stopped reading its stdin at {step.describe()}")
                break
        answers = await self._answers(peer, steps, after)
        problems += self._judge(steps, answers)
        self._unsettled = any(p.startswith(UNSETTLING) for p in problems)
        problems += await self._afterwards(peer)
        return problems

    async def _answers(
        self, peer: NativePeer, steps: list[crossdesk.RequestLine], after: float
    ) -> list[Line]:
        """Lines until every step has one (or the deadline, or the adapter's end)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ANSWER_DEADLINE
        wanted: dict[Any, int] = {}
        for step in steps:
            wanted[step.request_id] = wanted.get(step.request_id, 0) + 1
        while True:
            got: dict[Any, int] = {}
            for line in peer.lines:
                if line.t > after and line.message is not None:
                    got[line.message.get("id")] = got.get(line.message.get("id"), 0) + 1
            complete = all(got.get(rid, 0) >= count for rid, count in wanted.items())
            if complete or peer.eof or loop.time() > deadline:
                await asyncio.sleep(0.05)  # one more look: a second answer to one id
                return [line for line in peer.lines if line.t > after]
            async with peer._changed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await peer._changed.wait()

    def _judge(self, steps: list[crossdesk.RequestLine], answers: list[Line]) -> list[str]:
        """One answer per step under its id. Steps that share an id (duplicates,
        reuse) are judged as a group: some assignment of their answers must fit."""
        problems: list[str] = []
        groups: dict[Any, list[crossdesk.RequestLine]] = {}
        for step in steps:
            groups.setdefault(step.request_id, []).append(step)
        pending = list(answers)
        for wanted, group in groups.items():
            mine = [a for a in pending if a.message is not None and a.message.get("id") == wanted]
            for answer in mine:
                pending.remove(answer)
            if len(mine) < len(group):
                exited = " (the adapter exited)" if self.peer and self.peer.eof else ""
                problems += [
                    f"no answer to {step.describe()} within {ANSWER_DEADLINE:g} s{exited}"
                    for step in group[len(mine) :]
                ]
            elif len(mine) > len(group):
                shown = "; ".join(a.raw[:120].decode("utf-8", "replace") for a in mine)
                problems.append(
                    f"{len(mine)} answers to {len(group)} request(s) with id {wanted}: {shown}"
                )
            if not self._assignable(group[: len(mine)], mine[: len(group)]):
                problems += [
                    p
                    for step, a in zip(group, mine, strict=False)
                    for p in self._judge_answer(step, a)
                ] or [f"the answers to id {wanted} fit no request sent under it"]
        for extra in pending:
            problems.append(f"an answer to nothing sent: {extra.raw[:200]!r}")
        return problems

    def _assignable(self, steps: list[crossdesk.RequestLine], answers: list[Line]) -> bool:
        """Whether each step can take one answer of `answers` that it accepts."""
        if not steps:
            return True
        first, rest = steps[0], steps[1:]
        for index, answer in enumerate(answers):
            if not self._judge_answer(first, answer) and self._assignable(
                rest, answers[:index] + answers[index + 1 :]
            ):
                return True
        return False

    def _judge_answer(self, step: crossdesk.RequestLine, answer: Line) -> list[str]:
        message = answer.message or {}
        if not isinstance(message.get("ok"), bool):
            return [f"{step.describe()}: an answer without a boolean `ok`: {answer.raw[:200]!r}"]
        if message["ok"]:
            if not step.valid:
                return [f"{step.describe()}: accepted (ok) although {step.mutation}"]
            return []
        error = message.get("error")
        if not isinstance(error, dict) or not isinstance(error.get("code"), str):
            return [f"{step.describe()}: an error without a code: {answer.raw[:200]!r}"]
        for flag in ("retryable", "side_effect_possible"):
            if not isinstance(error.get(flag), bool):
                return [f"{step.describe()}: error {error['code']} without a boolean `{flag}`"]
        if self.codes != "tetherbed" or step.valid:
            return []
        code = error["code"]
        if len(step.data.rstrip(b"\n")) > spec.MAX_REQUEST_BYTES:
            expected = EXPECTED_CODES[crossdesk.OVERSIZED_LINE]
        elif step.field == "id" and step.mutation not in (mutations.DEEP_NESTING,):
            expected = EXPECTED_CODES[crossdesk.BAD_REQUEST_ID]
        else:
            expected = EXPECTED_CODES.get(step.mutation or "", ARGUMENT_CODES)
        if code not in expected and code != "DUPLICATE_REQUEST_ID":
            return [f"{step.describe()}: answered {code}, expected {' or '.join(sorted(expected))}"]
        return []

    async def _probe(self, peer: NativePeer) -> str | None:
        """None when `peer` answers hello; else what went wrong."""
        rid = next(self._probe_ids)
        line = json.dumps({"id": rid, "method": "hello", "protocol": spec.PROTOCOL}).encode()
        if not await peer.send_raw(line + b"\n", timeout=ANSWER_DEADLINE):
            return "its stdin is closed"
        answer = await peer.response(rid, ANSWER_DEADLINE)
        if answer is None:
            return "its stdout ended" if peer.eof else f"no answer within {ANSWER_DEADLINE:g} s"
        if not answer.ok:
            return f"hello answered {answer.describe()}"
        return None

    async def _afterwards(self, peer: NativePeer) -> list[str]:
        problems: list[str] = []
        problem = await self._probe(peer)
        if problem is not None:
            code = peer.proc.returncode if peer.proc is not None else None
            exited = f" (it exited with {code})" if code is not None else ""
            problems.append(f"the adapter is not usable afterwards: {problem}{exited}")
        if self.sibling is not None:
            problem = await self._probe(self.sibling)
            if problem is not None:
                problems.append(f"another adapter process was affected: {problem}")
                await self.sibling.stop()
                self.sibling = await self._spawn("sibling")
        return problems
