"""A reconnect storm judged from the recording: what the hub did, apart from the agents' backoff.

The load agents' backoff is Tetherbed's own code, so the time they wait before
coming back proves nothing about the hub. From the recorder's records:

- when every session was first served (a HELLO_ACK reached its agent);
- the drop and the heal (times the orchestrator noted);
- per session, the first HELLO_ACK on a connection opened after the drop:
  the session is served again; on that connection, upgrade → 101 plus
  HELLO → HELLO_ACK is the hub's accept latency (the agent's own time in
  between, its backoff and any partition before are left out);
- the hub's accept rate (HELLO_ACKs per second) while they came back;
- refused upgrades (HTTP statuses), the hub's close codes, unreachable
  attempts; and the sessions never served again: lost.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Conn:
    session: str | None = None
    connect: float | None = None
    #: When its upgrade request crossed (a connection held by a partition
    #: sends it only after the heal), when the 101 came back, when HELLO went up.
    upgrade: float | None = None
    opened: float | None = None
    hello: float | None = None
    served: float | None = None

    def hub_seconds(self) -> float | None:
        """The hub's own time: upgrade → 101, plus HELLO → HELLO_ACK (the agent's
        time in between, and any backoff before, are the agent's)."""
        if None in (self.upgrade, self.opened, self.hello, self.served):
            return None
        return (self.opened - self.upgrade) + (self.served - self.hello)  # type: ignore[operator]


@dataclass
class StormWatch:
    """Fed with records as the recorder writes them; knows who is served when."""

    sessions: int
    drop_at: float | None = None
    heal_at: float | None = None
    first_served: dict[str, float] = field(default_factory=dict)
    served_again: dict[str, float] = field(default_factory=dict)
    #: The hub's accept latency of each session's serving connection after the drop.
    accept_seconds: dict[str, float] = field(default_factory=dict)
    #: First attempt of each session after the drop (the agents' backoff is in it).
    first_attempt: dict[str, float] = field(default_factory=dict)
    refused: Counter[int] = field(default_factory=Counter)
    hub_closes: Counter[int] = field(default_factory=Counter)
    unreachable: int = 0
    attempts_after_drop: int = 0
    _conns: dict[str, _Conn] = field(default_factory=dict)

    def feed(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._one(record)

    def _one(self, record: dict[str, Any]) -> None:
        conn_id = record.get("conn")
        if not isinstance(conn_id, str):
            return
        conn = self._conns.setdefault(conn_id, _Conn())
        event, when = record.get("event"), float(record.get("t", 0.0))
        session = record.get("session")
        if isinstance(session, str):
            conn.session = session
        after_drop = self.drop_at is not None and when >= self.drop_at
        if event == "connect":
            conn.connect = when
            if after_drop:
                self.attempts_after_drop += 1
        elif event == "upgrade":
            conn.upgrade = when
            if after_drop and conn.session is not None:
                self.first_attempt.setdefault(conn.session, when)
        elif event == "open":
            conn.opened = when
        elif event == "frame" and record.get("type") == "HELLO" and record.get("dir") == "up":
            conn.hello = when
        elif event == "frame" and record.get("type") == "HELLO_ACK" and record.get("dir") == "down":
            conn.served = when
            if conn.session is None:
                return
            self.first_served.setdefault(conn.session, when)
            opened = conn.connect if conn.connect is not None else when
            again = self.drop_at is not None and opened >= self.drop_at
            if again and conn.session not in self.served_again:
                self.served_again[conn.session] = when
                hub = conn.hub_seconds()
                if hub is not None:
                    self.accept_seconds[conn.session] = hub
        elif event == "refused" and after_drop:
            status = record.get("status")
            self.refused[int(status) if isinstance(status, int) else 0] += 1
        elif event == "close" and record.get("by") == "hub" and record.get("first") and after_drop:
            code = record.get("code")
            self.hub_closes[int(code) if isinstance(code, int) else 0] += 1
        elif event == "unreachable" and after_drop:
            self.unreachable += 1

    @property
    def all_served(self) -> bool:
        return len(self.first_served) >= self.sessions

    @property
    def all_served_again(self) -> bool:
        return len(self.served_again) >= self.sessions

    def all_served_at(self) -> float | None:
        return max(self.first_served.values()) if self.all_served else None

    def accept_rate(self) -> tuple[float, float]:
        """HELLO_ACKs per second after the drop: the busiest second, and the mean
        from the first to the last."""
        times = sorted(self.served_again.values())
        if not times:
            return 0.0, 0.0
        per_second = Counter(math.floor(t) for t in times)
        spread = times[-1] - times[0]
        mean = len(times) / spread if spread > 0 else float(len(times))
        return float(max(per_second.values())), mean


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
