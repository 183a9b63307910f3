"""Hub configuration: the limits and policy it grants to agents."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from tetherbed.hub.dsh.config import DshConfig
from tetherbed.wire import limits, serial_io
from tetherbed.wire.messages import Capability
from tetherbed.wire.version import CURRENT_TEXT


class OwnershipPolicy(StrEnum):
    """How the hub settles two agents claiming one session (docs/spec-notes.md)."""

    #: The reference reading: same machine takes over (old gets SESSION_REVOKED
    #: then 4427); a different machine is refused with 4427 after its HELLO.
    REFERENCE = "reference"
    #: The close-code table's reading taken literally: 4427 always evicts the
    #: *old* connection, whichever machine the newcomer is on.
    EVICT_OLD = "evict-old"
    #: Deliberately broken: silent last-write-wins, the v0 behaviour the spec
    #: warns about. Exists so the checkers can be shown to catch it.
    LAST_WRITE_WINS = "last-write-wins"


#: Capabilities the hub grants when the agent advertises them. Recording is a
#: reserved preview and is never granted.
DEFAULT_GRANTS = frozenset(
    {
        Capability.DIRECTORY_BROWSE,
        Capability.SHELL,
        Capability.FILES,
        Capability.COMPUTER_USE,
        Capability.LOCAL_LLM,
        Capability.HARDWARE_SERIAL,
        Capability.HARDWARE_USB,
        Capability.HARDWARE_GPIO,
        # Tetherbed's serial I/O extension (wire/serial_io.py), for agents that offer it.
        serial_io.CAPABILITY,
    }
)


HUB_DEFECTS = frozenset(
    {
        "retry_non_idempotent",
        "orphan_on_disconnect",
        "shared_ids",
        "head_of_line",
        "grant_unadvertised",
        "no_ping",
        "ignore_capacity",
        "agent_auth_skipped",
        "crash_on_unknown_field",
        "llm_without_models",
        "no_request_deadline",
        "takeover_unlabelled",
        # Planted for `tetherbed explore` (docs/explore.md): bugs that only
        # some generated histories or interleavings show.
        "evict_after_drain",
        "revocation_unenforced",
        "reissue_unlabelled",
    }
)


@dataclass(slots=True)
class HubConfig:
    max_file_size_bytes: int = limits.DEFAULT_MAX_FILE_SIZE_BYTES
    command_timeout_seconds: int = limits.DEFAULT_COMMAND_TIMEOUT_SECONDS
    max_concurrent: int = limits.DEFAULT_MAX_CONCURRENT
    grants: frozenset[str] = field(default_factory=lambda: frozenset(map(str, DEFAULT_GRANTS)))
    ping_interval: float = limits.PING_INTERVAL_SECONDS
    pong_timeout: float = limits.PONG_TIMEOUT_SECONDS
    #: An agent must send HELLO this soon after the upgrade.
    hello_timeout: float = 10.0
    #: Requests held per session while the agent has no free slot.
    queue_limit: int = 256
    ownership: OwnershipPolicy = OwnershipPolicy.REFERENCE
    #: How long a session whose agent dropped unexpectedly stays reserved for
    #: that machine, holding idempotent requests for re-issue. Covers one full
    #: reconnect delay at the backoff cap (60 s + 5 s jitter).
    retry_window: float = 70.0
    #: Restore an idle-stopped session through its machine's control
    #: connection when a request for it arrives.
    auto_restore: bool = True
    #: Seconds the hub waits for an agent's answer to a request (other than
    #: EXECUTE_COMMAND), and at most for a free slot for a queued one; then
    #: the client gets AGENT_TIMEOUT (or SHIM_OVERLOADED: not sent).
    request_timeout: float = 60.0
    #: EXECUTE_COMMAND waits its own timeout (capped by
    #: command_timeout_seconds, as the agent caps it) plus this much.
    command_slack: float = 10.0
    #: A request the agent refused with SHIM_OVERLOADED is sent again at most
    #: this many times, after overload_backoff · 2^n seconds (capped).
    overload_retries: int = 4
    overload_backoff: float = 0.5
    overload_backoff_cap: float = 8.0
    #: An HTTP request (an upgrade) must arrive complete this soon after the
    #: TCP connection opens.
    handshake_timeout: float = 10.0
    #: A peer that has this many bytes waiting for it, or that has accepted
    #: no byte for this long while some wait, is a slow consumer: it is
    #: closed (1008) rather than allowed to hold anyone up.
    slow_consumer_bytes: int = 48 * limits.MiB
    slow_consumer_seconds: float = 20.0
    protocol_version: str = CURRENT_TEXT
    #: Deliberate bugs, for proving that the simulator's checkers catch them
    #: (docs/scenarios.md): "retry_non_idempotent", "orphan_on_disconnect",
    #: "shared_ids", and for the drivers "head_of_line" (send to a peer
    #: inside the sender's read loop, as the hub once did); for the
    #: conformance suite (docs/conformance.md) "grant_unadvertised",
    #: "no_ping", "ignore_capacity" and "agent_auth_skipped"; "llm_without_models"
    #: (LOCAL_LLM_COMPLETION relayed to an agent with no models); for the
    #: stateful fuzzer (docs/fuzzing.md) and exploration "no_request_deadline"
    #: (the slot leak: an issued request waits for its answer forever) and
    #: "takeover_unlabelled" (a takeover leaves the old owner serving, while
    #: the journal reports an ordinary takeover: two owners); for live fuzzing
    #: "crash_on_unknown_field"; for exploration (docs/explore.md) also
    #: "evict_after_drain" (a takeover race: the old owner keeps serving what
    #: it holds until answered), "revocation_unenforced" and
    #: "reissue_unlabelled" (a non-idempotent request re-issued with a retry
    #: counter, no `retry` logged). Never set in normal use.
    defects: frozenset[str] = frozenset()
    #: The dsh-computers routes' settings (hub/dsh).
    dsh: DshConfig = field(default_factory=DshConfig)

    def __post_init__(self) -> None:
        unknown = set(self.defects) - HUB_DEFECTS
        if unknown:
            raise ValueError(f"unknown hub defects {sorted(unknown)}")
        for name in (
            "max_file_size_bytes",
            "command_timeout_seconds",
            "max_concurrent",
            "request_timeout",
            "handshake_timeout",
            "slow_consumer_bytes",
            "slow_consumer_seconds",
            "overload_backoff",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.overload_retries < 0 or self.command_slack < 0:
            raise ValueError("overload_retries and command_slack must not be negative")


#: The hub's tunable limits, by the one name each goes by: `tetherbed hub
#: --NAME-WITH-DASHES` on the command line and `hub.options.NAME` in a
#: scenario. The value is the HubConfig attribute it sets.
TUNABLE_OPTIONS: dict[str, str] = {
    "max_file_size": "max_file_size_bytes",
    "command_timeout": "command_timeout_seconds",
    "max_concurrent": "max_concurrent",
    "ping_interval": "ping_interval",
    "pong_timeout": "pong_timeout",
    "queue_limit": "queue_limit",
    "retry_window": "retry_window",
    "request_timeout": "request_timeout",
    "command_slack": "command_slack",
    "overload_backoff": "overload_backoff",
    "overload_retries": "overload_retries",
    "handshake_timeout": "handshake_timeout",
    "slow_consumer_seconds": "slow_consumer_seconds",
    "slow_consumer_bytes": "slow_consumer_bytes",
}


def option_flag(name: str) -> str:
    """The command-line flag of a tunable option."""
    return "--" + name.replace("_", "-")
