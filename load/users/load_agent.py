"""A load agent: the real agent protocol core, answering like an agent would.

`AgentProtocol` (agent/protocol.py) is sans-I/O, so the same core that the
reference agent runs drives this one over a `websocket-client` link on gevent:
HELLO and its checks, capacity, `pending_capacity`, STATUS, PING → PONG,
SESSION_REVOKED. Instead of touching files or running commands it answers
after `service_seconds` with an answer of `answer_bytes`, so a run measures
the hub and not the agent's disk. Each connection is one `LoadAgent.connect`
and one `serve`; reconnecting is the caller's (with the spec's backoff).
"""

from __future__ import annotations

import platform
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import gevent

from tetherbed.agent.actions import Action, Close, Ready, Revoked, Run, Send
from tetherbed.agent.config import Limits
from tetherbed.agent.protocol import AgentProtocol
from tetherbed.load.users.websocket_link import Closed, Link
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.host import normalize_arch
from tetherbed.wire.messages import (
    Ack,
    Capability,
    CommandResult,
    FileContents,
    FileEntry,
    FileListResponse,
    FileStatResponse,
    Hello,
    MessageType,
    Payload,
)

#: How long a new connection may take to get its HELLO_ACK.
HANDSHAKE_SECONDS = 30.0


class Answers:
    """One answer payload per request type, of about `size` bytes, built once."""

    def __init__(self, size: int) -> None:
        text = "x" * size
        self.by_kind: dict[str, tuple[MessageType, Payload]] = {
            "FILE_STAT": (
                MessageType.FILE_STAT_RESPONSE,
                FileStatResponse(exists=True, is_file=True, is_dir=False, size_bytes=size),
            ),
            "FILE_READ": (
                MessageType.FILE_CONTENTS,
                FileContents(content=text, encoding="utf-8", size_bytes=size, truncated=False),
            ),
            "FILE_WRITE": (MessageType.ACK, Ack(ok=True)),
            "FILE_DELETE": (MessageType.ACK, Ack(ok=True)),
            "FILE_MOVE": (MessageType.ACK, Ack(ok=True)),
            "FILE_LIST": (
                MessageType.FILE_LIST_RESPONSE,
                FileListResponse(
                    entries=[
                        FileEntry(
                            name="load",
                            path="/load",
                            is_file=True,
                            is_dir=False,
                            is_symlink=False,
                            size_bytes=size,
                            mtime=0.0,
                        )
                    ],
                    truncated=False,
                ),
            ),
            "EXECUTE_COMMAND": (
                MessageType.COMMAND_RESULT,
                CommandResult(
                    stdout=text,
                    stderr="",
                    exit_code=0,
                    timed_out=False,
                    duration_seconds=0.0,
                    output_truncated=False,
                ),
            ),
        }


@dataclass(frozen=True, slots=True)
class AgentSettings:
    url: str
    token: str
    session: str
    machine: str
    root: str
    answers: Answers
    service_seconds: float = 0.0
    max_concurrent: int = 16


@dataclass(frozen=True, slots=True)
class Ended:
    """How a served connection ended."""

    code: int | None
    reason: str
    #: SESSION_REVOKED arrived first (a takeover by the same machine).
    revoked: bool
    #: Requests it answered.
    answered: int


class LoadAgent:
    """One connection of a load agent."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.link: Link | None = None
        self.answered = 0
        self._revoked = False
        hello = Hello(
            shim_version="tetherbed-load",
            protocol_version="1.1",
            machine_id=settings.machine,
            platform="linux",
            arch=normalize_arch(platform.machine()),
            capabilities=[str(Capability.FILES), str(Capability.SHELL)],
            allowed_root=settings.root,
        )
        self.protocol = AgentProtocol(
            hello=hello,
            local_limits=Limits(max_concurrent=settings.max_concurrent),
            clock=SystemClock(),
            new_id=lambda: uuid.uuid4().hex,
            session_id=settings.session,
        )

    def connect(self) -> float:
        """Dial, send HELLO, wait for HELLO_ACK; the seconds it took.

        Raises `Refused` (HTTP status), `Closed` (the hub closed it, with the
        code) or `OSError` (unreachable)."""
        started = time.perf_counter()
        settings = self.settings
        link = Link.open(
            f"{settings.url.rstrip('/')}/ws/local-executor/{settings.session}",
            headers={"Authorization": f"Bearer {settings.token}"},
            timeout=HANDSHAKE_SECONDS,
        )
        self.link = link
        try:
            link.send(self.protocol.start().data)
            link.settimeout(HANDSHAKE_SECONDS)
            while True:
                try:
                    data = link.recv()
                except TimeoutError:
                    link.abort()
                    raise Closed(None, "no HELLO_ACK in time") from None
                if self._act(self.protocol.receive(data)):
                    break
        except Closed:
            link.abort()
            raise
        link.settimeout(None)
        return time.perf_counter() - started

    def serve(self, until: Callable[[], bool] = lambda: False) -> Ended:
        """Answer requests until the connection ends (or `until()` says stop)."""
        link = self.link
        assert link is not None, "connect() first"
        protocol = self.protocol
        while not until():
            deadline = protocol.next_deadline()
            link.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.01))
            try:
                data = link.recv()
            except TimeoutError:
                self._act(protocol.on_timer())
                continue
            except Closed as closed:
                protocol.connection_lost()
                return Ended(closed.code, closed.reason, self._revoked, self.answered)
            try:
                self._act(protocol.receive(data))
            except Closed as closed:  # the core closed it (after SESSION_REVOKED, say)
                return Ended(closed.code, closed.reason, self._revoked, self.answered)
        return Ended(None, "stopped", self._revoked, self.answered)

    def close(self, code: int = 1000, reason: str = "") -> None:
        if self.link is not None:
            self.link.close(code, reason)

    def abort(self) -> None:
        """Vanish without a Close (a machine that went to sleep)."""
        if self.link is not None:
            self.link.abort()

    # --- actions ----------------------------------------------------------------

    def _act(self, actions: list[Action]) -> bool:
        """Carry out the core's actions; True once the handshake is done."""
        ready = False
        for action in actions:
            kind = type(action)
            if kind is Send:
                self._send(action.data)
            elif kind is Run:
                if self.settings.service_seconds > 0:
                    gevent.spawn(self._answer_later, action.request_id, str(action.kind))
                else:
                    self._answer(action.request_id, str(action.kind))
            elif kind is Ready:
                ready = True
            elif kind is Close:
                assert self.link is not None
                self.link.close(action.code, action.reason)
                raise Closed(action.code, action.reason)
            elif kind is Revoked:
                self._revoked = True
        return ready

    def _send(self, data: bytes) -> None:
        assert self.link is not None
        try:
            self.link.send(data)
        except Closed:
            pass  # the read loop sees the end

    def _answer(self, request_id: str, kind: str) -> None:
        answer = self.settings.answers.by_kind.get(kind)
        if answer is None:
            actions = self.protocol.fail(
                request_id, ProtocolError(ErrorCode.FEATURE_NOT_SUPPORTED, f"{kind} is not loaded")
            )
        else:
            actions = self.protocol.complete(request_id, *answer)
        self.answered += 1
        for action in actions:
            if type(action) is Send:
                self._send(action.data)

    def _answer_later(self, request_id: str, kind: str) -> None:
        gevent.sleep(self.settings.service_seconds)
        if self.link is not None and self.link.connected:
            self._answer(request_id, kind)
