"""What the registry keeps: computers and enrollment keys (§2).

Times are wall-clock seconds (they are persisted and compared across
restarts); `iso()` renders them the way the spec shows them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field


def iso(seconds: float | None) -> str | None:
    """`2026-11-11T10:00:05.000Z`, or None."""
    if seconds is None:
        return None
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Computer:
    id: str
    user: str
    name: str
    hostname: str
    token_hash: str
    created_at: float
    os: str = ""
    arch: str = ""
    platform_label: str = "Unknown"
    cpu_model: str = ""
    memory_bytes: int = 0
    node_version: str = ""
    agent_version: str = ""
    last_seen_at: float | None = None
    #: None: the agent never reported any (a v1 agent, treated as ["exec"]).
    capabilities: tuple[str, ...] | None = None
    capabilities_updated_at: float | None = None
    workspace_base: str | None = None
    #: §11.6.4: set by the first successful stream.
    activated_at: float | None = None


@dataclass(slots=True)
class PendingKey:
    #: sha256 of the key; the key itself is never stored.
    digest: str
    user: str
    created_at: float
    expires_at: float
    os: str
    label: str | None = None
    replace: bool = False
    used_at: float | None = None
    computer_id: str | None = None
    #: The key in clear, in memory only, so that `/state` can show the pending
    #: key again while this hub process runs (None after a restart).
    key: str | None = field(default=None, compare=False)
