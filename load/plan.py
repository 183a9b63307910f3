"""The plan of one load run: everything Locust's users need, as one JSON value.

`tetherbed load` (the orchestrator, no gevent) starts the topology and writes
the plan; Locust's processes (gevent) read it from their `--tetherbed-plan`
option. Locust's master hands custom options to every worker with the spawn
message, so workers on other machines need only the locustfile and the
master's address. Sessions are named, not listed, to keep the option short
for thousands of agents.
"""

from __future__ import annotations

import msgspec

PROFILES = ("relay", "storm", "takeover", "video")


class Stage(msgspec.Struct, frozen=True):
    """One stretch of a run: this many users for this long.

    `name` labels the stretch in the summary (a step of `--step`, a phase of
    the video profile); `classes` restricts which user classes run (None: all)."""

    name: str
    users: int
    seconds: float
    classes: list[str] | None = None


class Plan(msgspec.Struct, kw_only=True):
    profile: str
    #: Where load agents dial (the recorder in front of the hub when one is in
    #: the path) and where clients dial (the hub, or the adapter bridge).
    agent_url: str
    client_url: str
    #: The hub's user the run acts as, and its bearer tokens.
    user: str
    agent_token: str
    client_token: str
    #: Sessions served by load agents: `{prefix}-{n:05d}` for n < load_agents.
    session_prefix: str
    load_agents: int = 0
    #: Sessions served by real agent processes (clients address them too).
    real_sessions: list[str] = []
    #: Client users (besides the load agents).
    clients: int = 0
    #: The folder real agents serve; request paths live under it.
    root: str = "/load"
    #: Request type → weight.
    mix: dict[str, int] = msgspec.field(default_factory=lambda: {"FILE_STAT": 1})
    #: Size of the answers load agents send (content, stdout), and how long
    #: they take to answer.
    answer_bytes: int = 64
    service_seconds: float = 0.0
    #: Requests one load agent runs at once (its max_concurrent).
    agent_concurrency: int = 16
    #: Closed loop: requests each client keeps outstanding. Open loop:
    #: `rate_per_client` requests per second each, whatever comes back.
    in_flight: int = 1
    rate_per_client: float | None = None
    #: An open-loop client counts a request failed instead of sending it when
    #: this many are still unanswered (the generator must never queue).
    max_outstanding: int = 1000
    #: Clients talk to a raw echo server (the generator's baseline): an answer
    #: is the request itself, coming back.
    echo: bool = False
    #: A request with no answer after this long is a failure (lost).
    request_timeout: float = 30.0
    #: Stages of the run, in order; the run ends after the last.
    stages: list[Stage] = []
    spawn_rate: float = 100.0
    #: The master's output folder (stages.json, timeline.jsonl).
    out_dir: str = "."
    #: Clients write their legs (invoke and completion of every request) as
    #: history records into this folder (takeover: judged from the recording).
    legs_dir: str | None = None
    #: Takeover profile: seconds between one session's wake-ups (the same
    #: machine replacing its own connection) and other machines' challenges.
    takeover_every: float = 2.0
    challenge_every: float = 3.0
    challengers: int = 0
    #: Storm profile: how dropped agents come back: the spec's backoff, or all
    #: at once (the hub's worst case).
    reconnect: str = "spec"
    #: Video profile: where viewers get a ticket and the listener's URL, the
    #: Origin they present, and how slow the slow viewers ack.
    grant_url: str = ""
    fast_viewers: int = 0
    slow_viewers: int = 0
    slow_ack_seconds: float = 0.2

    def session(self, index: int) -> str:
        """The session of load agent `index`."""
        return f"{self.session_prefix}-{index:05d}"

    def client_sessions(self) -> list[str]:
        """Every session clients address: the load agents' and the real agents'."""
        return [self.session(n) for n in range(self.load_agents)] + list(self.real_sessions)

    @property
    def total_seconds(self) -> float:
        return sum(stage.seconds for stage in self.stages)

    def encode(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def decode(cls, text: str | bytes) -> Plan:
        return msgspec.json.decode(text, type=cls)
