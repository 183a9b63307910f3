"""What crossed the wire in a stateful run, and the invariants it must keep.

The ledger sees only frames and closes (what a hub under test sends to whom,
and what the test sends it), never the hub's own bookkeeping, so it judges any
core-like hub the same way. Every client request carries a unique tag (`K<n>Z`)
inside its payload; the relay copies payloads untouched, so the tag names the
request on the agent side too, whatever id the hub gives it there.

Each invariant breach raises `InvariantViolated` with the invariant's name, so
a test can assert *which* property a planted bug breaks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import msgspec

from tetherbed.wire import catalog
from tetherbed.wire.codes import ErrorCode, ExtensionCode

#: The names of the invariants, as `InvariantViolated.invariant` carries them.
EXACTLY_ONE_ANSWER = "exactly_one_answer"
ONE_OWNER = "at_most_one_owner"
CAPACITY = "capacity_not_leaked"
DEADLINE = "no_request_outlives_its_deadline"
REVOKED = "revoked_admits_no_one"
AT_MOST_ONCE = "non_idempotent_runs_at_most_once"
TYPED = "every_refusal_typed"

_TAG = re.compile(rb"K\d+Z")
_STREAMING = frozenset(str(kind) for kind in catalog.STREAMING_RESPONSES)
_SPEC_CODES = frozenset(map(str, ErrorCode)) | frozenset(map(str, ExtensionCode))


class InvariantViolated(AssertionError):
    """A stateful invariant broke; `invariant` is one of the names above."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(f"[{invariant}] {message}")
        self.invariant = invariant


def tag_of(data: bytes) -> str | None:
    """The request tag a frame carries in its payload, if any."""
    found = _TAG.search(data)
    return found.group().decode() if found else None


def _error_code(data: bytes) -> object:
    frame = msgspec.json.decode(data)
    payload = frame.get("payload") if isinstance(frame, dict) else None
    return payload.get("code") if isinstance(payload, dict) else None


def frame_head(data: bytes) -> tuple[str, str | None]:
    """(type, id) of a frame; ("", None) when it is not a JSON object."""
    try:
        frame = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return "", None
    if not isinstance(frame, dict):
        return "", None
    kind = frame.get("type")
    ident = frame.get("id")
    return (kind if isinstance(kind, str) else ""), (ident if isinstance(ident, str) else None)


@dataclass(slots=True)
class Request:
    """One client request, from its sending to its one terminal answer."""

    tag: str
    client: str
    client_id: str
    kind: str
    sent_at: float
    #: The session it addresses (data requests) or names (control requests).
    session: str | None
    #: The session was revoked before the request was sent.
    after_revocation: bool
    answers: list[tuple[str, float]] = field(default_factory=list)
    #: Its client went away: no answer is owed.
    abandoned: bool = False
    #: The frames its client got, as they came.
    frames: list[bytes] = field(default_factory=list)


@dataclass(slots=True)
class Issue:
    """One hand-over of a request to an agent connection."""

    tag: str
    at: float
    budget: float


@dataclass(slots=True)
class Connection:
    """An agent connection as the wire shows it."""

    name: str
    session: str | None
    #: The machine it says it is on (its HELLO's machine_id).
    machine: str = ""
    acked: bool = False
    #: The hub closed it or told it the session is revoked (it owns nothing now).
    released: bool = False
    closed: bool = False
    #: hub id -> the request handed over under it, until the agent answers it.
    issued: dict[str, Issue] = field(default_factory=dict)


class WireLedger:
    """Everything the invariants need, learnt from frames only."""

    def __init__(self) -> None:
        self.requests: dict[str, Request] = {}
        self.by_client_id: dict[tuple[str, str], str] = {}
        self.connections: dict[str, Connection] = {}
        self.revoked_at: dict[str, float] = {}
        self.closed_clients: set[str] = set()
        #: tag -> agent, for non-idempotent requests an agent admitted (and did
        #: not refuse as busy): they may have run.
        self.started: dict[str, str] = {}
        self._tags = 0

    # --- what the test sends ---------------------------------------------------

    def new_tag(self) -> str:
        self._tags += 1
        return f"K{self._tags}Z"

    def client_sent(
        self, tag: str, client: str, client_id: str, kind: str, *, now: float, session: str | None
    ) -> None:
        self.requests[tag] = Request(
            tag,
            client,
            client_id,
            kind,
            now,
            session,
            after_revocation=session is not None and session in self.revoked_at,
        )
        self.by_client_id[(client, client_id)] = tag

    def client_closed(self, client: str) -> None:
        self.closed_clients.add(client)
        for request in self.requests.values():
            if request.client == client and not request.answers:
                request.abandoned = True

    def connected(self, name: str, session: str | None, machine: str) -> None:
        self.connections[name] = Connection(name, session, machine)

    def connection_closed(self, name: str) -> None:
        connection = self.connections[name]
        connection.closed = True
        connection.issued.clear()

    def revoked(self, session: str, now: float) -> None:
        self.revoked_at.setdefault(session, now)

    # --- what the hub sends --------------------------------------------------------

    def hub_sent_to_client(self, client: str, data: bytes, now: float) -> None:
        kind, ident = frame_head(data)
        if kind in _STREAMING:
            return
        tag = self.by_client_id.get((client, ident or ""))
        if tag is None:
            raise InvariantViolated(
                EXACTLY_ONE_ANSWER, f"{client} got {kind} for id {ident!r}, which it never sent"
            )
        request = self.requests[tag]
        request.frames.append(data)
        if kind == "ERROR":
            code = _error_code(data)
            if code not in _SPEC_CODES:
                raise InvariantViolated(
                    TYPED, f"{tag} ({request.kind}) was refused with code {code!r}, not a spec code"
                )
        if client in self.closed_clients:
            raise InvariantViolated(
                EXACTLY_ONE_ANSWER, f"{client} got {kind} for {tag} after it closed"
            )
        request.answers.append((kind, now))
        if len(request.answers) > 1:
            raise InvariantViolated(
                EXACTLY_ONE_ANSWER,
                f"{tag} ({request.kind} from {client}) got {len(request.answers)} terminal "
                f"answers: {request.answers}",
            )
        for connection in self.connections.values():
            for hub_id, issue in list(connection.issued.items()):
                if issue.tag == tag:
                    del connection.issued[hub_id]

    def hub_sent_to_agent(self, name: str, data: bytes, now: float, budget: float) -> None:
        connection = self.connections[name]
        kind, ident = frame_head(data)
        if kind == "HELLO_ACK":
            session = connection.session
            if session is not None and session in self.revoked_at:
                raise InvariantViolated(
                    REVOKED, f"{name} was admitted to session {session}, which was revoked"
                )
            connection.acked = True
            self.check_owners()
            return
        if kind == "SESSION_REVOKED":
            connection.released = True
            return
        tag = tag_of(data)
        if tag is None or tag not in self.requests or ident is None:
            return  # a PING, or a request the hub makes on its own
        request = self.requests[tag]
        if request.after_revocation:
            raise InvariantViolated(
                REVOKED,
                f"{tag} ({request.kind}) for revoked session {request.session} was sent "
                f"to agent {name}",
            )
        connection.issued[ident] = Issue(tag, now, budget)

    def agent_admitted(self, name: str, kind: str, payload: bytes) -> None:
        """Agent `name` admitted a request: a non-idempotent one may now have run."""
        tag = tag_of(payload)
        if tag is None or catalog.is_idempotent(kind):
            return
        if tag in self.started:
            raise InvariantViolated(
                AT_MOST_ONCE,
                f"{tag} ({kind}, not idempotent) reached agent {name} after agent "
                f"{self.started[tag]} had admitted it: it may run twice",
            )
        self.started[tag] = name

    def agent_refused_unrun(self, payload: bytes) -> None:
        """The agent refused it as busy: it ran nothing, so sending it again is fine."""
        tag = tag_of(payload)
        if tag is not None:
            self.started.pop(tag, None)

    def hub_closed(self, name: str) -> None:
        self.connections[name].released = True

    def agent_answered(self, name: str, data: bytes) -> None:
        """A frame from agent `name` reached the hub."""
        kind, ident = frame_head(data)
        if kind in _STREAMING or ident is None:
            return
        self.connections[name].issued.pop(ident, None)

    # --- invariants ----------------------------------------------------------------

    def owners(self, claim: str) -> list[str]:
        """Live acknowledged connections serving `claim`: a session id, or
        `machine:<id>` for a machine's control connection."""
        return [
            c.name
            for c in self.connections.values()
            if _claim_of(c) == claim and c.acked and not c.released and not c.closed
        ]

    def check_owners(self) -> None:
        for claim in sorted({_claim_of(c) for c in self.connections.values()}):
            owners = self.owners(claim)
            if owners and claim in self.revoked_at:
                raise InvariantViolated(
                    REVOKED, f"session {claim} is still served by {owners} after its revocation"
                )
            if len(owners) > 1:
                raise InvariantViolated(ONE_OWNER, f"{claim} has {len(owners)} owners: {owners}")

    def check_deadlines(self, now: float) -> None:
        for connection in self.connections.values():
            for hub_id, issue in connection.issued.items():
                request = self.requests[issue.tag]
                if request.answers or request.abandoned:
                    continue
                if now > issue.at + issue.budget + 1e-6:
                    raise InvariantViolated(
                        DEADLINE,
                        f"{issue.tag} ({request.kind}) was handed to {connection.name} as "
                        f"{hub_id} at t={issue.at:g} with a {issue.budget:g} s deadline; at "
                        f"t={now:g} its client has no answer",
                    )

    def check_all_answered(self) -> None:
        """After everything settled: every request still owed has its one answer."""
        for request in self.requests.values():
            if not request.answers and not request.abandoned:
                raise InvariantViolated(
                    EXACTLY_ONE_ANSWER,
                    f"{request.tag} ({request.kind} from {request.client}, sent at "
                    f"t={request.sent_at:g}) never got an answer",
                )

    def open_issues(self, name: str) -> dict[str, Issue]:
        """What agent `name` holds and its client still waits for."""
        connection = self.connections[name]
        return {
            hub_id: issue
            for hub_id, issue in connection.issued.items()
            if not self.requests[issue.tag].answers and not self.requests[issue.tag].abandoned
        }


def _claim_of(connection: Connection) -> str:
    if connection.session is not None:
        return connection.session
    return f"machine:{connection.machine}"
