"""What a dsh-computers history shows, in the shapes the dsh checkers read.

Everything here comes from the wire recording of SSE agents' links
(`wiretap/dsh/records.py`) and the dsh clients' legs (`simulator/dsh/client.py`),
plus the runner's fault and process events; route names and event names come
from `wire/dsh`. Nothing from the hub's or the agents' own journals.

- `streams`: every event stream an agent held — when its GET was sent, when it
  opened, its `hello` (and so its computer), its other events, how it ended;
- `requests`: every request an agent sent, with the answer that reached it;
- `calls`: every dsh client call, its invoke and its completion;
- `disturbances`: per agent, the intervals in which its link could hold or
  lose bytes (a partition, a lasting fault, the agent paused), when the hub
  cannot see what the agent did, nor the agent what the hub did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tetherbed.simulator.faults import INSTANT_FAULTS
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap import records as wire
from tetherbed.simulator.wiretap.dsh import records as d
from tetherbed.simulator.wiretap.dsh.summary import route_of
from tetherbed.wire.dsh import constants as C

INFINITY = float("inf")


def is_dsh(record: Record) -> bool:
    return (
        record.type == "event"
        and isinstance(record.value, dict)
        and record.value.get("leg") == d.LEG
        and wire.node_of(record.process) is not None
    )


@dataclass(eq=False)
class Stream:
    agent: str
    conn: str
    n: int
    request: Record | None
    opened: Record
    hello: Record | None = None
    events: list[Record] = field(default_factory=list)
    end: Record | None = None

    @property
    def computer(self) -> str | None:
        if self.hello is None:
            return None
        value = data_of(self.hello).get("computerId")
        return value if isinstance(value, str) else None

    @property
    def asked_at(self) -> float:
        """When the agent sent its GET (the hub cannot have opened it before)."""
        return (self.request or self.opened).time

    @property
    def hello_at(self) -> float | None:
        return self.hello.time if self.hello is not None else None

    @property
    def ended_at(self) -> float:
        return self.end.time if self.end is not None else INFINITY


@dataclass(eq=False)
class Exchange:
    agent: str
    conn: str
    n: int
    request: Record
    response: Record | None = None

    @property
    def route(self) -> str | None:
        return route_of(self.request.value.get("path", ""))

    @property
    def body(self) -> dict[str, Any]:
        return mapping(self.request.value.get("body"))

    @property
    def status(self) -> int | None:
        return self.response.value.get("status") if self.response is not None else None


@dataclass(eq=False)
class Call:
    invoke: Record
    completion: Record | None = None

    @property
    def f(self) -> str:
        return self.invoke.f

    @property
    def asked(self) -> dict[str, Any]:
        """What the invoke recorded."""
        return mapping(self.invoke.value)

    @property
    def value(self) -> dict[str, Any]:
        """What the completion recorded ({} while there is none)."""
        return mapping(self.completion.value) if self.completion is not None else {}


@dataclass
class Wire:
    streams: list[Stream]
    exchanges: list[Exchange]
    calls: list[Call]
    #: Per agent: (from, until) intervals in which its link was disturbed.
    disturbed: dict[str, list[tuple[float, float]]]
    end: float

    def disturbed_during(self, agent: str, start: float, stop: float) -> bool:
        return any(a <= stop and start <= b for a, b in self.disturbed.get(agent, []))

    def disturbed_until(self, agent: str, when: float) -> float:
        """The end of the disturbance in force at `when` (`when` if none)."""
        until = when
        for a, b in self.disturbed.get(agent, []):
            if a <= when <= b:
                until = max(until, b)
        return until

    def calls_of(self, f: str) -> list[Call]:
        return [c for c in self.calls if c.f == f]

    def results_for(self, request_id: str) -> list[Exchange]:
        return [
            e
            for e in self.exchanges
            if e.route == C.Route.RESULTS and e.body.get("requestId") == request_id
        ]

    def chunks_for(self, request_id: str) -> list[Exchange]:
        return [
            e
            for e in self.exchanges
            if e.route == C.Route.RESULTS_CHUNK and e.body.get("requestId") == request_id
        ]

    def exec_events(self) -> list[tuple[Stream, Record]]:
        return [
            (s, r) for s in self.streams for r in s.events if r.value.get("event") == C.Event.EXEC
        ]

    def dispatched(self, call: Call) -> list[tuple[Stream, Record]]:
        """The `exec` events a computer_exec call became: by the request id its
        answer names, or else by the command's digest within the call's life."""
        request_id = call.value.get("requestId")
        events = self.exec_events()
        if isinstance(request_id, str):
            return [(s, e) for s, e in events if data_of(e).get("requestId") == request_id]
        digest = call.asked.get("commandDigest")
        until = call.completion.time if call.completion is not None else self.end
        return [
            (s, e)
            for s, e in events
            if call.invoke.time <= e.time <= until
            and mapping(data_of(e).get("command")).get("digest") == digest
        ]


def mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a mapping, else {} (a checker judges whatever was written)."""
    return value if isinstance(value, dict) else {}


def data_of(event: Record) -> dict[str, Any]:
    """An SSE event record's kept data."""
    return mapping(mapping(event.value).get("data"))


def read(history: History) -> Wire:
    streams: list[Stream] = []
    open_streams: dict[tuple[str, str, int], Stream] = {}
    pending: dict[tuple[str, str, int], Record] = {}
    exchanges: dict[tuple[str, str, int], Exchange] = {}
    calls: dict[tuple[str, Any], Call] = {}
    call_list: list[Call] = []
    end = 0.0
    for record in history.records:
        end = max(end, record.time)
        if is_dsh(record):
            _wire_record(record, streams, open_streams, pending, exchanges)
        elif (
            record.process.startswith("client:")
            and record.type == "invoke"
            and _hashable(record.req)
        ):
            call = Call(record)
            calls[record.process, record.req] = call
            call_list.append(call)
        elif (
            record.process.startswith("client:")
            and record.type in ("ok", "fail", "info")
            and _hashable(record.req)
        ):
            call = calls.get((record.process, record.req))
            if call is not None and call.completion is None:
                call.completion = record
    agents = {s.agent for s in streams} | {e.agent for e in exchanges.values()}
    return Wire(
        streams=streams,
        exchanges=sorted(exchanges.values(), key=lambda e: e.request.index),
        calls=[c for c in call_list if _is_dsh_call(c)],
        disturbed={agent: _disturbances(history, agent, end) for agent in agents},
        end=end,
    )


def _wire_record(
    record: Record,
    streams: list[Stream],
    open_streams: dict[tuple[str, str, int], Stream],
    pending: dict[tuple[str, str, int], Record],
    exchanges: dict[tuple[str, str, int], Exchange],
) -> None:
    agent = wire.node_of(record.process)
    assert agent is not None
    value = record.value
    conn = value.get("conn")
    n = value.get("n")
    if not isinstance(conn, str) or (n is not None and not isinstance(n, int)):
        return  # not something the recorder writes: nothing to follow
    key = (agent, conn, n)
    if record.f == d.HTTP_REQUEST:
        pending[key] = record
        exchanges[key] = Exchange(agent, conn, value.get("n"), record)
    elif record.f == d.HTTP_RESPONSE:
        exchange = exchanges.get(key)
        if exchange is not None:
            exchange.response = record
    elif record.f == d.SSE_OPEN:
        stream = Stream(agent, conn, value.get("n"), pending.get(key), record)
        streams.append(stream)
        open_streams[key] = stream
        exchanges.pop(key, None)  # a stream, not an exchange
    elif record.f == d.SSE_EVENT:
        stream = open_streams.get(key)
        if stream is None:
            return
        if value.get("event") == C.Event.HELLO and stream.hello is None:
            stream.hello = record
        else:
            stream.events.append(record)
    elif record.f == d.SSE_END:
        stream = open_streams.pop(key, None)
        if stream is not None:
            stream.end = record
    elif record.f == wire.END:
        for other in [k for k in open_streams if k[0] == agent and k[1] == conn]:
            open_streams.pop(other).end = record


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float)


def _is_dsh_call(call: Call) -> bool:
    return call.f in ("create_key", "state", "computer_exec", "rename_computer", "delete_computer")


def _disturbances(history: History, agent: str, end: float) -> list[tuple[float, float]]:
    """When the agent's link could hold or drop bytes: partitions until healed,
    lasting faults until cleared, the agent paused until resumed (or killed)."""
    spans: list[tuple[float, float]] = []
    started: dict[str, float] = {}
    for record in history.records:
        if record.type != "event" or not isinstance(record.value, dict):
            continue
        value = record.value
        if record.process == "fault":
            target = value.get("target")
            kind = value.get("kind")
            if record.f == "fault_start" and target == agent and kind not in INSTANT_FAULTS:
                started.setdefault(str(kind), record.time)
            elif record.f == "fault_stop" and target in (agent, "all"):
                # `heal` ends partitions; `clear` ends every other fault.
                ending = (
                    ["partition"]
                    if kind == "partition"
                    else [k for k in started if k != "partition"]
                )
                for name in ending:
                    if name in started:
                        spans.append((started.pop(name), record.time))
        elif record.process == f"agent:{agent}":
            if record.f == "paused":
                started.setdefault("paused", record.time)
            elif record.f in ("resumed", "killed", "exited") and "paused" in started:
                spans.append((started.pop("paused"), record.time))
        elif record.process == "hub" and record.f in ("paused", "resumed"):
            if record.f == "paused":
                started.setdefault("hub paused", record.time)
            elif "hub paused" in started:
                spans.append((started.pop("hub paused"), record.time))
    spans += [(since, end) for since in started.values()]
    return sorted(spans)
