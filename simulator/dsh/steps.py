"""A scenario's dsh-computers steps, on any backend.

`create_key`, `exec`, `rename_computer` and `delete_computer` are calls of a
dsh client (`client.py`); `enroll` is the agent's own `enroll` command, run by
the backend through the agent's link; `expect {computer: A, online: X}` reads
`/state` until A's computer shows X (every read recorded: the presence checker
judges them all). What a step needs to know about an agent comes from the
wire recording, as a checker would read it: its computer's id from the enroll
answer that reached it, whether it is connected from its event stream.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from tetherbed.simulator.dsh.client import DshClient
from tetherbed.simulator.scenario import Step
from tetherbed.simulator.scenario.dsh import default_reader
from tetherbed.simulator.validation import Where
from tetherbed.simulator.wiretap import records as wire
from tetherbed.simulator.wiretap.dsh import records as d
from tetherbed.simulator.wiretap.dsh.summary import route_of
from tetherbed.wire.dsh import constants as C

if TYPE_CHECKING:
    from tetherbed.simulator.runner import ScenarioRunner

STEP_KINDS = frozenset({"create_key", "enroll", "exec", "rename_computer", "delete_computer"})
#: How often a presence expect reads /state (the settings page polls every 5 s;
#: a scenario wants to see a change sooner).
PRESENCE_POLL_S = 0.25


class StepFailed(Exception):
    """The condition of a dsh expect did not hold (the runner reports it)."""


class DshSteps:
    def __init__(self, runner: ScenarioRunner) -> None:
        self.runner = runner
        #: The keys created so far, by step id (never recorded).
        self.keys: dict[str, str] = {}
        #: Each agent's computer, from the enroll answers read so far.
        self._computers: dict[str, str] = {}
        self._read = 0

    def client(self, name: str) -> DshClient:
        client = self.runner.clients[name]
        assert isinstance(client, DshClient)
        return client

    async def run_step(self, step: Step) -> None:
        args = step.args
        kind = step.kind
        backend = self.runner.backend
        if kind == "create_key":
            key = await self.client(args["client"]).create_key(
                str(args["id"]),
                os=args["os"],
                replace=args["replace"],
                label=args.get("label"),
                forwarded_host=args.get("forwarded_host"),
            )
            if key is not None:
                self.keys[args["id"]] = key
        elif kind == "enroll":
            key = self.keys.get(args["key"])
            if key is None:
                raise StepFailed(f"key {args['key']!r} was not created (its create_key failed)")
            await backend.dsh_enroll(args["agent"], key)
        elif kind == "exec":
            agent = args["computer"]
            self.client(args["client"]).exec(
                str(args["id"]),
                self.computer_id(agent) or self.runner.scenario.topology.agents[agent].machine,
                args["command"],
                cwd=args.get("cwd"),
                timeout_ms=args.get("timeout_ms"),
            )
        elif kind == "rename_computer":
            client = self.client(args["client"])
            await client.rename(
                client.next_id("rename"), self.computer_id(args["computer"]), args["name"]
            )
        elif kind == "delete_computer":
            client = self.client(args["client"])
            await client.delete(client.next_id("delete"), self.computer_id(args["computer"]))

    # --- reading the wire ----------------------------------------------------------------

    def computer_id(self, agent: str) -> str | None:
        """The computer the agent enrolled as (the last enroll answer that reached
        it); an agent sharing another's token is that one's computer."""
        records = self.runner.recorder.history.records
        for record in records[self._read :]:
            node = wire.node_of(record.process)
            value = record.value if isinstance(record.value, dict) else {}
            if (
                node is not None
                and record.f == d.HTTP_RESPONSE
                and value.get("status") == 200
                and route_of(value.get("path")) == C.Route.ENROLL
            ):
                computer = (value.get("body") or {}).get("computerId")
                if isinstance(computer, str):
                    self._computers[node] = computer
        self._read = len(records)
        spec = self.runner.scenario.topology.agents[agent]
        return self._computers.get(spec.token_of or agent)

    def connected(self, agent: str) -> bool:
        """The running agent holds a stream the hub accepted: its `hello` reached
        the agent and neither the stream nor its connection ended since. (Streams
        opened before the agent's last start — `enroll`'s probe — do not count.)"""
        process = wire.process_of(agent)
        live: set[Any] = set()
        records = self.runner.recorder.history.records
        started = max(
            (r.index for r in records if r.process == f"agent:{agent}" and r.f == "started"),
            default=-1,
        )
        for record in records[started + 1 :]:
            if record.process != process or record.type != "event":
                continue
            conn = record.value.get("conn")
            if record.f == d.SSE_EVENT and record.value.get("event") == C.Event.HELLO:
                live.add(conn)
            elif record.f in (d.SSE_END, wire.END):
                live.discard(conn)
        return bool(live)

    # --- presence ------------------------------------------------------------------------

    async def expect_presence(self, args: dict[str, Any], within: float) -> None:
        agent = args["computer"]
        topology = self.runner.scenario.topology
        reader = args.get("via") or default_reader(topology, agent, Where("expect"))
        client = self.client(reader)
        backend = self.runner.backend
        deadline = backend.now() + within
        wanted = bool(args["online"])
        seen: str = "no answer"
        while True:
            computer = self.computer_id(agent)
            rows = await client.state(client.next_id("state"))
            if rows is not None:
                row = next((r for r in rows if computer is not None and r["id"] == computer), None)
                if row is not None and bool(row.get("online")) == wanted:
                    return
                seen = (
                    f"online={row.get('online')}"
                    if row is not None
                    else f"not listed (computer {computer})"
                )
            if backend.now() + PRESENCE_POLL_S > deadline:
                raise StepFailed(f"{agent}'s computer is {seen}, expected online={wanted}")
            await asyncio.sleep(PRESENCE_POLL_S)

    # --- the hub's stored state ----------------------------------------------------------

    def check_stored_credentials(self) -> None:
        """No enrollment key or agent token this run created is stored in clear."""
        stored = self.runner.backend.dsh_stored_state()
        secrets = set(self.keys.values()) | self.runner.backend.dsh_tokens()
        found = sorted(
            f"{'key' if s in self.keys.values() else 'token'} {s[:9]}…"
            for s in secrets
            if s in stored
        )
        if found:
            raise StepFailed(f"the hub stores in clear: {', '.join(found)}")
        if not secrets:
            raise StepFailed("no key or token was created: nothing to look for")
