"""The dsh-computers part of the hub's configuration (§8, §10.1, §11.6)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from tetherbed.wire.dsh import constants as C

#: Deliberate bugs, so that the conformance suite can be shown to catch them.
DSH_HUB_DEFECTS = frozenset(
    {
        # An enrollment key can enroll any number of machines.
        "reusable_key",
        # The agent token is stored (and compared) in clear instead of its digest.
        "token_in_clear",
        # Online means "sent a heartbeat lately", not "holds a stream".
        "presence_from_heartbeat",
        # Streamed chunks are passed on in arrival order, duplicates included.
        "chunks_out_of_order",
        # The install URL follows X-Forwarded-Host / Forwarded / Host (§4.2
        # steps 2-3), which any client can set.
        "install_url_from_forwarded_header",
    }
)


def clean_public_url(text: str) -> str:
    """An operator's public URL, checked: http(s), a host, no query, no quote."""
    value = text.strip().rstrip("/")
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"public URL {text!r} must be http:// or https:// with a host")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"public URL {text!r} must not carry a query, fragment or userinfo")
    if any(ch in value for ch in "'\"`$\\ \t\r\n<>"):
        raise ValueError(f"public URL {text!r} holds a character a shell or page would misread")
    return value


@dataclass(slots=True)
class DshConfig:
    #: The externally reachable base (may carry a path prefix). Empty: the
    #: address the request arrived on (never a header; docs/spec-notes.md).
    public_url: str = ""
    role: str = C.Role.BOTH
    key_ttl_minutes: float = C.KEY_TTL_MINUTES
    heartbeat_ms: int = C.HEARTBEAT_MS
    exec_timeout_ms: int = C.EXEC_TIMEOUT_MS
    exec_enabled: bool = True
    max_output_bytes: int = C.MAX_OUTPUT_BYTES
    #: §11.6.3: a foreground computer_exec that reaches its timeout becomes a
    #: background job instead of being cancelled.
    promote_on_timeout: bool = True
    #: How long the agent lets a command run that may become (or is) a
    #: background job; the agent kills it then (docs/spec-notes.md).
    background_timeout_ms: int = 3_600_000
    #: §11.6.5. Reading: "1.0" by default, so that v1 agents keep working as
    #: §11.5 promises (the spec's "plugin's major.minor" would refuse them).
    min_agent_version: str = "1.0"
    #: §11.6.4: a computer whose agent never opened a stream is not listed.
    hide_unactivated: bool = True
    #: Extra time after an exec's timeout for the agent's own timed-out
    #: result to arrive before the hub gives up on it.
    result_grace_ms: int = 5000
    #: Background jobs keep this much of their output (the job ring).
    job_ring_bytes: int = 1 * C.MiB
    #: Out-of-order chunks held per execution while waiting for a gap.
    max_buffered_chunks: int = 256
    #: The hub's state directory, for the runtime's runtime.json (§10.2).
    state_dir: str = ""
    defects: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.defects) - DSH_HUB_DEFECTS
        if unknown:
            raise ValueError(f"unknown dsh hub defects {sorted(unknown)}")
        if self.role not in C.ROLES:
            raise ValueError(f"role must be one of {C.ROLES}")
        if self.public_url:
            self.public_url = clean_public_url(self.public_url)
        for name in ("key_ttl_minutes", "heartbeat_ms", "exec_timeout_ms", "max_output_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @property
    def serves_hub(self) -> bool:
        return self.role in (C.Role.HUB, C.Role.BOTH)

    @property
    def serves_runtime(self) -> bool:
        return self.role in (C.Role.RUNTIME, C.Role.BOTH)
