"""The Locust users every profile is built from: load agents and clients.

Each is abstract here; a locustfile makes concrete classes of them (with the
counts its profile needs). Every request goes through Locust's `request`
event with its real latency, so Locust's statistics, CSV and HTML reports —
and Tetherbed's own timeline — see the same thing:

| type | name | what it times |
|---|---|---|
| `ws` | the request type (`FILE_STAT`, ...) | a client request through the hub, to its answer |
| `agent` | `connect` / `reconnect` | dial, upgrade, HELLO → HELLO_ACK (the hub's accept) |
| `agent` | `takeover` | the same machine's new connection, to its HELLO_ACK |
| `agent` | `challenge` | another machine's connection, to the hub's verdict |
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import gevent
from locust import User, task

from tetherbed.agent.backoff import Backoff
from tetherbed.load.mix import Payloads
from tetherbed.load.plan import Plan
from tetherbed.load.users import draining, slots
from tetherbed.load.users.client_legs import ClientLegs
from tetherbed.load.users.hub_client import HubClient, Lost
from tetherbed.load.users.load_agent import AgentSettings, Answers, LoadAgent
from tetherbed.load.users.plan_option import plan_of
from tetherbed.load.users.websocket_link import Closed, Refused
from tetherbed.wire.backoff import HEALTHY_AFTER_SECONDS
from tetherbed.wire.codes import is_fatal_close

#: How long a client waits, before its first request, for an agent to serve its session.
SERVED_PATIENCE = 60.0
_answers: dict[int, Answers] = {}
_legs: dict[str, ClientLegs] = {}


def answers_of(plan: Plan) -> Answers:
    found = _answers.get(plan.answer_bytes)
    if found is None:
        found = _answers[plan.answer_bytes] = Answers(plan.answer_bytes)
    return found


def legs_of(plan: Plan) -> ClientLegs | None:
    """This process's client-leg file, when the profile is judged from the recording."""
    if plan.legs_dir is None:
        return None
    legs = _legs.get(plan.legs_dir)
    if legs is None:
        legs = _legs[plan.legs_dir] = ClientLegs(Path(plan.legs_dir))
    return legs


def agent_settings(plan: Plan, session: str, machine: str) -> AgentSettings:
    return AgentSettings(
        url=plan.agent_url,
        token=plan.agent_token,
        session=session,
        machine=machine,
        root=plan.root,
        answers=answers_of(plan),
        service_seconds=plan.service_seconds,
        max_concurrent=plan.agent_concurrency,
    )


def close_legs() -> None:
    for legs in _legs.values():
        legs.close()
    _legs.clear()


class LoadUser(User):
    abstract = True

    def report(
        self, kind: str, name: str, seconds: float, length: int, error: Exception | None
    ) -> None:
        self.environment.events.request.fire(
            request_type=kind,
            name=name,
            response_time=seconds * 1000.0,
            response_length=length,
            exception=error,
            context={},
        )

    @property
    def plan(self) -> Plan:
        return plan_of(self.environment)


class AgentUser(LoadUser):
    """A load agent serving one session; it reconnects after a drop.

    Reconnects follow the spec's schedule (`min(2^n, 60) + U(0, 5)` s), or at
    once with the plan's `reconnect: immediate` (the hub's worst case). A
    fatal close (4426–4429) ends it, as the spec says."""

    abstract = True

    def on_start(self) -> None:
        plan = self.plan
        self.slot = slots.claim(self.environment, "agent")
        self.session = plan.session(self.slot)
        self.machine = f"{plan.session_prefix}-m{self.slot:05d}"
        self.backoff = Backoff(random.Random(self.slot))
        self.current: LoadAgent | None = None
        self.stopped = False

    def dial(self, name: str) -> LoadAgent | None:
        """One connection attempt, reported as `name`; the agent once served."""
        agent = LoadAgent(agent_settings(self.plan, self.session, self.machine))
        started = time.perf_counter()
        try:
            seconds = agent.connect()
        except (Refused, Closed, OSError) as exc:
            self.report("agent", name, time.perf_counter() - started, 0, exc)
            return None
        self.report("agent", name, seconds, 0, None)
        return agent

    @task
    def live(self) -> None:
        self.lifecycle()

    def lifecycle(self) -> None:
        """Connect, serve, and after a drop come back on the backoff."""
        name = "connect"
        while not self.stopped:
            agent = self.dial(name)
            name = "reconnect"
            if agent is not None:
                self.current = agent
                served_at = time.monotonic()
                ended = agent.serve()
                self.current = None
                if is_fatal_close(ended.code):
                    self.stopped = True
                    break
                if time.monotonic() - served_at >= HEALTHY_AFTER_SECONDS:
                    self.backoff.reset()
            delay = 0.0 if self.plan.reconnect == "immediate" else self.backoff.next_delay()
            gevent.sleep(delay)

    def on_stop(self) -> None:
        self.stopped = True
        if self.current is not None:
            self.current.close(1000, "load test over")


class ClientUser(LoadUser):
    """A client sending the plan's request mix to one session through the hub.

    Closed loop: `in_flight` requests outstanding, each sent when the last
    answer came. Open loop: `rate_per_client` requests a second, sent when due
    whatever comes back (and failed, never queued, past `max_outstanding`)."""

    abstract = True

    def on_start(self) -> None:
        plan = self.plan
        self.slot = slots.claim(self.environment, "client")
        sessions = plan.client_sessions()
        self.session = sessions[self.slot % len(sessions)]
        self.rng = random.Random(self.slot)
        self.kinds = list(plan.mix)
        self.weights = [plan.mix[k] for k in self.kinds]
        self.helpers: list[gevent.Greenlet] = []
        self.client = HubClient.open(
            plan.client_url,
            plan.client_token,
            self.session,
            tag=f"c{self.slot}",
            payloads=Payloads(plan.root, plan.answer_bytes),
            report=self.report,
            timeout=plan.request_timeout,
            takeovers_expected=plan.profile == "takeover",
            echo=plan.echo,
            legs=legs_of(plan),
        )
        draining.track(self.client)
        started = time.perf_counter()
        try:
            self.client.wait_served(SERVED_PATIENCE)
        except Lost as exc:
            self.report("client", "session served", time.perf_counter() - started, 0, exc)
            raise
        self.report("client", "session served", time.perf_counter() - started, 0, None)

    def next_kind(self) -> str:
        return self.rng.choices(self.kinds, self.weights)[0]

    @task
    def load(self) -> None:
        plan = self.plan
        if plan.rate_per_client:
            self._open_loop(plan.rate_per_client, plan.max_outstanding)
            return
        for _ in range(plan.in_flight - 1):
            self.helpers.append(gevent.spawn(self._closed_loop))
        self._closed_loop()

    def _closed_loop(self) -> None:
        client = self.client
        while not draining.state.stopping and client.closed is None:
            client.call(self.next_kind())

    def _open_loop(self, rate: float, max_outstanding: int) -> None:
        client = self.client
        interval = 1.0 / rate
        # Spread the clients' sends over the interval instead of in lockstep.
        due = time.perf_counter() + self.rng.random() * interval
        while not draining.state.stopping and client.closed is None:
            wait = due - time.perf_counter()
            if wait > 0:
                gevent.sleep(wait)
            kind = self.next_kind()
            if client.outstanding >= max_outstanding:
                self.report(
                    "ws",
                    kind,
                    0.0,
                    0,
                    RuntimeError(f"not sent: {max_outstanding} requests still unanswered"),
                )
            else:
                client.send(kind, due)
            due += interval

    def on_stop(self) -> None:
        for helper in self.helpers:
            helper.kill(block=False)
        client = getattr(self, "client", None)
        if client is not None:
            draining.forget(client)
            client.close()
