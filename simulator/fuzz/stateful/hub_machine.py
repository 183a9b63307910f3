"""A Hypothesis state machine over a sans-I/O hub, real agent protocols and clients.

Everything runs in one thread in virtual time: the machine feeds the hub
connections, frames, closes and the clock, carries out the actions it returns,
and drives the real `AgentProtocol` on the agent side of each connection.
Rules cover the protocol's hard moments — agents connecting, sending HELLO
(or not), taking over from the same machine, challenging from another,
dropping cleanly or not, being partitioned; clients of sessions and of
machines' control connections sending requests; agents answering late, never,
twice or "busy"; time jumping past deadlines; sessions being revoked — and
after every step the invariants are checked:

- exactly one terminal answer per client request (and, once everything has
  settled, every request has had it);
- at most one owner per session (and per machine's control connection);
- capacity never leaked or negative;
- no request handed to an agent outlives its deadline without its client
  hearing so;
- a revoked session admits no agent and relays nothing sent after revocation.

The wire invariants judge any core-like hub (override `make_hub`); the slot
check reads `HubCore`'s own links and is skipped for a hub that has none.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import msgspec
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tetherbed.agent.actions import Run
from tetherbed.hub.actions import Authorize, Close, Record, Send
from tetherbed.hub.config import HubConfig
from tetherbed.hub.core import HubCore
from tetherbed.hub.request_policy import answer_budget
from tetherbed.simulator.fuzz.stateful.agent_end import AgentEnd, new_agent_end
from tetherbed.simulator.fuzz.stateful.virtual_clock import VirtualClock
from tetherbed.simulator.fuzz.stateful.wire_ledger import (
    CAPACITY,
    InvariantViolated,
    WireLedger,
)
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    Ack,
    CommandResult,
    DirectoryListResponse,
    FileStatResponse,
    MessageType,
    Payload,
    SessionAttached,
    SessionRestored,
)
from tetherbed.wire.version import CURRENT_TEXT

T = MessageType
#: What a client of a session, and of a machine, may ask in a run.
SESSION_KINDS = (T.FILE_STAT, T.FILE_MOVE, T.EXECUTE_COMMAND)
MACHINE_KINDS = (T.DIRECTORY_LIST_REQUEST, T.ATTACH_SESSION)
#: How far one `time_passes` step jumps (around the hub's deadlines).
TIME_STEPS = (0.5, 3.0, 11.0, 31.0, 41.0, 61.0, 75.0)
#: Long enough for every deadline, hold and back-off to run out.
SETTLE_SECONDS = 1000.0
#: Timer firings one time step may take before the hub is deemed to spin.
MAX_FIRINGS = 5000


@dataclass(frozen=True, slots=True)
class Peer:
    """What the hub is handed as a connection: its kind and name."""

    kind: str
    name: str


@dataclass(eq=False)
class ClientEnd:
    name: str
    #: ("session", id) or ("machine", id)
    target: tuple[str, str]
    link: Any = None
    ids: Any = field(default_factory=lambda: itertools.count(1))
    closed: bool = False


class HubMachine(RuleBasedStateMachine):
    """Subclass to change the topology, the hub's configuration or the hub itself."""

    USER = "alice"
    SESSIONS = ("s1", "s2")
    MACHINES = ("m1", "m2")
    MAX_AGENTS = 6
    MAX_CLIENTS = 6
    #: Slots per agent (the agents' own limit and the hub's grant).
    MAX_CONCURRENT = 2
    #: Planted hub defects to run with (hub/config.py HUB_DEFECTS).
    HUB_DEFECTS: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.clock = VirtualClock()
        self.config = self.hub_config()
        self.hub = self.make_hub(self.clock)
        self.ledger = WireLedger()
        self.agents: dict[str, AgentEnd] = {}
        self.clients: dict[str, ClientEnd] = {}
        self.revoked: set[str] = set()
        self.journal: list[tuple[float, str, dict[str, Any]]] = []
        self._agent_names = itertools.count(1)
        self._client_names = itertools.count(1)

    # --- what a subclass may change ---------------------------------------------------

    def hub_config(self) -> HubConfig:
        return HubConfig(
            max_concurrent=self.MAX_CONCURRENT, queue_limit=4, defects=self.HUB_DEFECTS
        )

    def make_hub(self, clock: VirtualClock) -> Any:
        """The hub under test: anything with HubCore's event methods and actions."""
        return HubCore(self.config, clock)

    def request_budget(self, data: bytes) -> float:
        """How long the hub may take to answer a request it just handed to an agent."""
        frame = msgspec.json.decode(data)
        payload = msgspec.Raw(msgspec.json.encode(frame.get("payload")))
        return answer_budget(self.config, frame.get("type", ""), payload)

    def slot_problems(self) -> list[str]:
        """What is wrong with the hub's slot accounting (HubCore's links; [] otherwise)."""
        links = getattr(self.hub, "agents", None)
        if not isinstance(links, dict):
            return []
        problems: list[str] = []
        ends = {id(end.link): end for end in self.agents.values()}
        for link in links:
            end = ends.get(id(link))
            if end is None:
                continue
            held = len(link.routes)
            if link.capacity < 0 or held > max(link.limit, 0):
                problems.append(
                    f"{end.name}: {held} requests held, capacity {link.capacity}, "
                    f"limit {link.limit}"
                )
            issued = self.ledger.connections[end.name].issued
            for hub_id, route in link.routes.items():
                if route.client is None:
                    continue  # the hub's own request (a transparent restore)
                if hub_id not in issued:
                    problems.append(
                        f"{end.name}: slot {hub_id} ({route.kind}) is still held although "
                        "the agent answered it or its client was answered"
                    )
        return problems

    # --- driving the hub -----------------------------------------------------------------

    def _now(self) -> float:
        return self.clock.monotonic()

    def _apply(self, actions: Any) -> None:
        """Carry out the hub's actions, then check its slots: an overcommitment
        the agent's refusals undo within the step must not slip by."""
        self._carry_out(actions)
        self.capacity_not_leaked()

    def _carry_out(self, actions: Any) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._deliver_from_hub(action.peer, action.data)
            elif isinstance(action, Close):
                peer = action.peer
                if peer.kind == "agent":
                    end = self.agents[peer.name]
                    self.ledger.hub_closed(end.name)
                    if end.closing is None:
                        end.closing = (action.code, "hub")
            elif isinstance(action, Authorize):
                allowed = action.session_id not in self.revoked
                self._carry_out(self.hub.authorized(action.ticket, allowed))
            elif isinstance(action, Record):
                self.journal.append((self._now(), action.event, dict(action.fields)))

    def _admitted(self, name: str, run: Run) -> None:
        self.ledger.agent_admitted(name, str(run.kind), bytes(run.raw or b""))

    def _deliver_from_hub(self, peer: Peer, data: bytes) -> None:
        if peer.kind == "client":
            self.ledger.hub_sent_to_client(peer.name, data, self._now())
            return
        end = self.agents[peer.name]
        if end.closed:
            return
        self.ledger.hub_sent_to_agent(end.name, data, self._now(), self.request_budget(data))
        end.to_agent.append(data)

    def _settle(self) -> None:
        """Deliver frames until the wire is quiet (partitioned ones stay put)."""
        for _ in range(10_000):
            moved = False
            for end in list(self.agents.values()):
                if end.closed:
                    continue
                if end.closing is not None:
                    if end.closing[1] == "hub" and end.to_hub and not end.partitioned:
                        # What the agent sent before the hub's close frame reached
                        # it still arrives first (a DETACHED link's answers).
                        frames, end.to_hub = end.to_hub, []
                        for data in frames:
                            self.ledger.agent_answered(end.name, data)
                            self._apply(self.hub.agent_frame(end.link, data))
                    self._close(end)
                    moved = True
                    continue
                if end.partitioned:
                    continue
                if end.to_hub:
                    frames, end.to_hub = end.to_hub, []
                    for data in frames:
                        if end.closed or end.closing is not None:
                            break
                        self.ledger.agent_answered(end.name, data)
                        self._apply(self.hub.agent_frame(end.link, data))
                    moved = True
                if end.to_agent and not end.closed and end.closing is None:
                    frames, end.to_agent = end.to_agent, []
                    for data in frames:
                        end.take(end.protocol.receive(data))
                    moved = True
            if not moved:
                return
        raise AssertionError("the wire never went quiet: hub and agents loop")

    def _close(self, end: AgentEnd) -> None:
        code, _ = end.closing or (None, "")
        end.closed = True
        end.to_agent.clear()
        end.to_hub.clear()
        end.pending.clear()
        end.protocol.connection_lost()
        self.ledger.connection_closed(end.name)
        self._apply(self.hub.agent_closed(end.link, code))

    def _run_timers_until(self, until: float) -> None:
        for _ in range(MAX_FIRINGS):
            dues = [self.hub.next_deadline()]
            dues += [e.protocol.next_deadline() for e in self.agents.values() if not e.closed]
            due = min((d for d in dues if d is not None), default=None)
            if due is None or due > until:
                break
            self.clock.advance_to(max(due, self._now()))
            self.ledger.check_deadlines(self._now())
            self._apply(self.hub.on_timer())
            for end in self.agents.values():
                if not end.closed:
                    end.take(end.protocol.on_timer())
            self._settle()
        else:
            raise AssertionError(f"the hub's timers fired {MAX_FIRINGS} times in one step")
        self.clock.advance_to(until)
        self.ledger.check_deadlines(self._now())
        self._apply(self.hub.on_timer())
        self._settle()

    def _live_agents(self) -> list[str]:
        return [name for name, end in self.agents.items() if not end.closed]

    def _open_clients(self) -> list[str]:
        return [name for name, client in self.clients.items() if not client.closed]

    # --- rules: agents -----------------------------------------------------------------

    @initialize()
    def serving(self) -> None:
        """The first machine serves every session and has its control connection
        up, and a client waits on each session and machine, so that requests
        reach agents from the first step (rules then take it all apart)."""
        machine = self.MACHINES[0]
        for session in (*self.SESSIONS, None):
            self._connect(machine, session, hello=True)
        for session in self.SESSIONS:
            self.open_client(("session", session))
        for machine in self.MACHINES:
            self.open_client(("machine", machine))

    @precondition(lambda self: len(self._live_agents()) < self.MAX_AGENTS)
    @rule(data=st.data())
    def connect_agent(self, data: st.DataObject) -> None:
        """An agent's upgrade is accepted (for a revoked session too: a revocation
        may land between the upgrade and the HELLO); session None is a machine's
        control connection."""
        machine = data.draw(st.sampled_from(self.MACHINES), label="machine")
        session = data.draw(st.sampled_from((*self.SESSIONS, None)), label="session")
        hello = data.draw(st.sampled_from((True, True, True, False)), label="hello at once")
        self._connect(machine, session, hello=hello)

    def _connect(self, machine: str, session: str | None, *, hello: bool) -> None:
        name = f"a{next(self._agent_names)}"
        end = new_agent_end(
            name,
            machine=machine,
            session=session,
            clock=self.clock,
            max_concurrent=self.MAX_CONCURRENT,
        )
        end.on_run = self._admitted
        self.agents[name] = end
        self.ledger.connected(name, session, machine)
        end.link, actions = self.hub.agent_opened(
            Peer("agent", name), user=self.USER, session_id=session
        )
        self._apply(actions)
        self._settle()
        if hello:
            self._hello(end)

    @precondition(lambda self: any(not e.hello_sent and not e.closed for e in self.agents.values()))
    @rule(data=st.data())
    def send_hello(self, data: st.DataObject) -> None:
        """A HELLO sent late (or never: the hub's HELLO timeout then closes it)."""
        waiting = [n for n, e in self.agents.items() if not e.hello_sent and not e.closed]
        self._hello(self.agents[data.draw(st.sampled_from(waiting), label="agent")])

    def _hello(self, end: AgentEnd) -> None:
        end.hello_sent = True
        end.to_hub.append(end.protocol.start().data)
        self._settle()

    @precondition(lambda self: bool(self._live_agents()))
    @rule(data=st.data())
    def agent_acts(self, data: st.DataObject) -> None:
        """One agent does one thing: answers a request (most often), answers one
        a second time or with the wrong type, refuses one as busy, is
        partitioned or healed, or drops its connection cleanly (1000: it lets
        the session go) or abruptly."""
        end = self.agents[data.draw(st.sampled_from(self._live_agents()), label="agent")]
        choices = ["partition", "disconnect_clean", "disconnect_abrupt"]
        if end.pending:
            choices += ["answer"] * 6 + ["refuse_busy", "answer_wrong_type"]
        if end.answered:
            choices.append("answer_again")
        action = data.draw(st.sampled_from(sorted(choices)), label="action")
        if action == "answer":
            self._answer(end, data.draw(st.sampled_from(sorted(end.pending)), label="request"))
        elif action == "refuse_busy":
            request_id = data.draw(st.sampled_from(sorted(end.pending)), label="request")
            run = end.pending.pop(request_id)
            self.ledger.agent_refused_unrun(bytes(run.raw or b""))
            busy = ProtocolError(ErrorCode.SHIM_OVERLOADED, "busy", request_id=request_id)
            end.take(end.protocol.fail(request_id, busy))
        elif action == "answer_wrong_type":
            request_id = data.draw(st.sampled_from(sorted(end.pending)), label="request")
            run = end.pending.pop(request_id)
            wrong = T.ACK if run.kind is not T.FILE_MOVE else T.FILE_STAT_RESPONSE
            payload = Ack(ok=True) if wrong is T.ACK else FileStatResponse(exists=False)
            end.take(end.protocol.complete(request_id, wrong, payload))
        elif action == "answer_again":
            request_id = data.draw(st.sampled_from(sorted(end.answered)), label="request")
            end.to_hub.append(end.answered[request_id])
        elif action == "partition":
            end.partitioned = not end.partitioned
        elif end.closing is None:
            end.closing = (1000 if action == "disconnect_clean" else None, "agent")
        self._settle()

    @precondition(lambda self: any(e.pending and not e.closed for e in self.agents.values()))
    @rule(data=st.data())
    def agent_answers(self, data: st.DataObject) -> None:
        """Some agent answers one of the requests it holds (the most common event)."""
        held = [
            (name, request_id)
            for name, end in self.agents.items()
            if not end.closed
            for request_id in end.pending
        ]
        name, request_id = data.draw(st.sampled_from(held), label="request")
        self._answer(self.agents[name], request_id)
        self._settle()

    def _answer(self, end: AgentEnd, request_id: str) -> None:
        run = end.pending.pop(request_id)
        kind, payload = answer_for(run)
        actions = end.protocol.complete(request_id, kind, payload)
        sent = [a for a in actions if hasattr(a, "data")]
        if sent:
            end.answered[request_id] = sent[0].data
        end.take(actions)

    # --- rules: clients ----------------------------------------------------------------

    @precondition(lambda self: len(self._open_clients()) < self.MAX_CLIENTS)
    @rule(data=st.data())
    def another_client(self, data: st.DataObject) -> None:
        targets = [("session", s) for s in self.SESSIONS] + [("machine", m) for m in self.MACHINES]
        self.open_client(data.draw(st.sampled_from(targets), label="target"))

    def open_client(self, target: tuple[str, str]) -> None:
        name = f"c{next(self._client_names)}"
        client = ClientEnd(name, target)
        self.clients[name] = client
        peer = Peer("client", name)
        if target[0] == "session":
            client.link, actions = self.hub.client_opened(
                peer, user=self.USER, session_id=target[1]
            )
        else:
            client.link, actions = self.hub.machine_client_opened(
                peer, user=self.USER, machine_id=target[1]
            )
        self._apply(actions)
        self._settle()

    @precondition(lambda self: bool(self._open_clients()))
    @rule(data=st.data())
    def client_requests(self, data: st.DataObject) -> None:
        """A client sends one to three requests back to back."""
        client = self.clients[data.draw(st.sampled_from(self._open_clients()), label="client")]
        for _ in range(data.draw(st.integers(1, 3), label="count")):
            self._request(client, data)
        self._settle()

    def _request(self, client: ClientEnd, data: st.DataObject) -> None:
        where, key = client.target
        kinds = SESSION_KINDS if where == "session" else MACHINE_KINDS
        kind = data.draw(st.sampled_from(kinds), label="kind")
        tag = self.ledger.new_tag()
        session = key if where == "session" else None
        if kind is T.FILE_STAT:
            payload: dict[str, Any] = {"path": f"/w/{tag}"}
        elif kind is T.FILE_MOVE:
            payload = {"src": f"/w/{tag}", "dst": f"/w/{tag}.moved"}
        elif kind is T.EXECUTE_COMMAND:
            timeout = data.draw(st.sampled_from((1, 20, 300)), label="timeout")
            payload = {"argv": ["echo", tag], "timeout_seconds": timeout}
        elif kind is T.DIRECTORY_LIST_REQUEST:
            payload = {"browse_id": tag}
        else:
            session = data.draw(st.sampled_from(self.SESSIONS), label="session")
            payload = {"session_id": session, "browse_id": tag, "directory_ref": "d1"}
        request_id = f"r{next(client.ids)}"
        frame = msgspec.json.encode(
            {
                "type": str(kind),
                "id": request_id,
                "payload": payload,
                "ts": self.clock.time(),
                "version": CURRENT_TEXT,
            }
        )
        self.ledger.client_sent(
            tag, client.name, request_id, str(kind), now=self._now(), session=session
        )
        self._apply(self.hub.client_frame(client.link, frame))

    @precondition(lambda self: bool(self._open_clients()))
    @rule(data=st.data())
    def close_client(self, data: st.DataObject) -> None:
        client = self.clients[data.draw(st.sampled_from(self._open_clients()), label="client")]
        client.closed = True
        self.ledger.client_closed(client.name)
        self._apply(self.hub.client_closed(client.link))
        self._settle()

    # --- rules: time and the control plane ---------------------------------------------

    @rule(seconds=st.sampled_from(TIME_STEPS))
    def time_passes(self, seconds: float) -> None:
        self._run_timers_until(self._now() + seconds)

    @rule(data=st.data())
    def revoke_session(self, data: st.DataObject) -> None:
        """The user revokes a session (the store remembers; the hub is told)."""
        session = data.draw(st.sampled_from(self.SESSIONS), label="session")
        self.revoked.add(session)
        self.ledger.revoked(session, self._now())
        self._apply(self.hub.revoke(self.USER, session))
        self._settle()

    @precondition(
        lambda self: any(not r.answers and not r.abandoned for r in self.ledger.requests.values())
    )
    @rule()
    def everything_settles(self) -> None:
        """Partitions heal and a long time passes: every request owed an answer has it."""
        for end in self.agents.values():
            end.partitioned = False
        self._settle()
        self._run_timers_until(self._now() + SETTLE_SECONDS)
        self.ledger.check_all_answered()

    # --- invariants ------------------------------------------------------------------

    @invariant()
    def at_most_one_owner(self) -> None:
        self.ledger.check_owners()

    @invariant()
    def no_request_outlives_its_deadline(self) -> None:
        self.ledger.check_deadlines(self._now())

    @invariant()
    def capacity_not_leaked(self) -> None:
        problems = self.slot_problems()
        for end in self.agents.values():
            held = len(end.protocol.in_flight)
            if held > end.protocol.limits.max_concurrent:
                problems.append(f"agent {end.name} admitted {held} requests")
        if problems:
            raise InvariantViolated(CAPACITY, "; ".join(problems))


def answer_for(run: Run) -> tuple[MessageType, Payload]:
    """A well-formed successful answer to an admitted request."""
    kind = run.kind
    if kind is T.FILE_STAT:
        return T.FILE_STAT_RESPONSE, FileStatResponse(exists=False)
    if kind is T.EXECUTE_COMMAND:
        result = CommandResult(
            stdout="",
            stderr="",
            exit_code=0,
            timed_out=False,
            duration_seconds=0.0,
            output_truncated=False,
        )
        return T.COMMAND_RESULT, result
    if kind is T.DIRECTORY_LIST_REQUEST:
        listing = DirectoryListResponse(
            browse_id="b1",
            current=None,
            parent_ref=None,
            entries=[],
            next_cursor=None,
            truncated=False,
            expires_at=0.0,
        )
        return T.DIRECTORY_LIST_RESPONSE, listing
    session_id = getattr(run.payload, "session_id", "s")
    binding = {"session_id": session_id, "allowed_root": "/w", "fingerprint": "f", "revision": 1}
    if kind is T.ATTACH_SESSION:
        return T.SESSION_ATTACHED, SessionAttached(**binding, root_grant=f"g-{session_id}")
    if kind is T.RESTORE_SESSION:
        grant = getattr(run.payload, "root_grant", "g")
        return T.SESSION_RESTORED, SessionRestored(**binding, root_grant=grant)
    return T.ACK, Ack(ok=True)
