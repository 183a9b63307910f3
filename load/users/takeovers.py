"""Owners that keep being replaced by their own machine, and machines that challenge them.

An owner serves its session and, every `takeover_every` seconds (±50 %),
wakes up as the same machine on a new connection — every other time after
going silent (its old connection dropped without a Close, as a laptop lid
closes), every other time while the old one is still open. The hub must
hand the session over (the old connection gets SESSION_REVOKED and 4427, or
its loss is noticed) and re-issue or answer what the old one held. A
challenger is another machine claiming a random session every
`challenge_every` seconds; the hub's verdict (4427 after the HELLO under the
reference reading, a takeover under another) is the answer it times.
"""

from __future__ import annotations

import random
import time

import gevent

from tetherbed.load.users import roles, slots
from tetherbed.load.users.load_agent import LoadAgent
from tetherbed.load.users.websocket_link import Closed, Refused
from tetherbed.wire.codes import CloseCode


def _jittered(rng: random.Random, seconds: float) -> float:
    return seconds * rng.uniform(0.5, 1.5)


class OwnerUser(roles.AgentUser):
    abstract = True

    def on_start(self) -> None:
        super().on_start()
        self.rng = random.Random(self.slot)
        self.serving: gevent.Greenlet | None = None

    def _serve(self, agent: LoadAgent) -> None:
        self.current = agent
        self.serving = gevent.spawn(agent.serve)

    def lifecycle(self) -> None:
        plan = self.plan
        agent = None
        while agent is None and not self.stopped:
            agent = self.dial("connect")
            if agent is None:
                gevent.sleep(self.backoff.next_delay())
        if agent is None:
            return
        self._serve(agent)
        sleep = False
        while not self.stopped:
            gevent.sleep(_jittered(self.rng, plan.takeover_every))
            old = self.current
            if sleep and old is not None:
                old.abort()  # the machine went to sleep: no Close, nothing more
            sleep = not sleep
            new = self.dial("takeover")
            if new is None:
                continue  # the old one (if alive) keeps the session; try again later
            self._serve(new)

    def on_stop(self) -> None:
        super().on_stop()
        if self.serving is not None:
            self.serving.kill(block=False)


class ChallengerUser(roles.LoadUser):
    """Another machine, claiming sessions it does not own."""

    abstract = True

    def on_start(self) -> None:
        plan = self.plan
        self.slot = slots.claim(self.environment, "challenger")
        self.rng = random.Random(1000 + self.slot)
        self.machine = f"{plan.session_prefix}-intruder-{self.slot}"

    def challenge(self) -> None:
        plan = self.plan
        gevent.sleep(_jittered(self.rng, plan.challenge_every))
        index = self.rng.randrange(plan.load_agents)
        agent = LoadAgent(roles.agent_settings(plan, plan.session(index), self.machine))
        started = time.perf_counter()
        try:
            agent.connect()
        except Closed as closed:
            elapsed = time.perf_counter() - started
            if closed.code == CloseCode.SESSION_TAKEN_OVER:
                self.report("agent", "challenge (refused)", elapsed, 0, None)
            else:
                self.report("agent", "challenge", elapsed, 0, closed)
            return
        except (Refused, OSError) as exc:
            self.report("agent", "challenge", time.perf_counter() - started, 0, exc)
            return
        # Another reading of the spec let it in: it leaves at once, cleanly.
        self.report("agent", "challenge (accepted)", time.perf_counter() - started, 0, None)
        agent.close(1000, "challenger leaves")
