"""Agent configuration (local policy) and the limits in force on a connection."""

from __future__ import annotations

from dataclasses import dataclass, field

from tetherbed.wire import limits
from tetherbed.wire.messages import HelloAck
from tetherbed.wire.version import CURRENT_TEXT

#: Deliberate bugs, for proving that the simulator's checkers catch them
#: (docs/scenarios.md). Never set in normal use.
AGENT_DEFECTS = frozenset(
    {
        "ignore_fatal_close",
        "reconnect_immediately",
        "lose_writes",
        "crlf_read",
        "jail_skips_symlinks",
        "leak_environment",
        "timeout_kills_shell_only",
        "raw_window_ids",
        "reconnect_after_4427",
        "no_status_edge",
        "ignore_grants",
        "control_refs_survive_reconnect",
        "llm_chunk_finish_reason",
        "llm_busy_unenforced",
        "accept_reserved_names",
        "serial_without_negotiation",
        "jail_off_by_one",
        "cwd_by_path",
    }
)


def hub_url_problem(url: str) -> str | None:
    """Why `url` cannot be the hub's base URL (None when it can).

    The agent dials the hub's WebSocket endpoints, so the URL is ws:// or
    wss://; an http(s) URL or a bare host:port is a common slip, answered
    with the URL that was meant.
    """
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("ws", "wss") and rest.strip("/"):
        return None
    if sep and scheme in ("http", "https"):
        meant = ("wss://" if scheme == "https" else "ws://") + rest
    elif sep:
        meant = "ws://" + rest
    else:
        meant = "ws://" + url
    return f"must be a ws:// or wss:// URL, got {url!r} (did you mean {meant.rstrip('/')}?)"


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits in force on one connection: the lower of local policy and HELLO_ACK."""

    max_file_size_bytes: int = limits.DEFAULT_MAX_FILE_SIZE_BYTES
    command_timeout_seconds: float = limits.DEFAULT_COMMAND_TIMEOUT_SECONDS
    max_concurrent: int = limits.DEFAULT_MAX_CONCURRENT

    def narrowed_by(self, ack: HelloAck) -> Limits:
        """The platform can lower a ceiling but never raise it past local policy."""
        return Limits(
            max_file_size_bytes=min(self.max_file_size_bytes, ack.max_file_size_bytes),
            command_timeout_seconds=min(self.command_timeout_seconds, ack.command_timeout_seconds),
            max_concurrent=min(self.max_concurrent, ack.max_concurrent),
        )


@dataclass(slots=True)
class AgentConfig:
    """Everything an agent process is told on its command line."""

    hub_url: str
    token: str
    root: str
    session_id: str | None = None
    machine_id: str = ""
    enable_shell: bool = False
    local_limits: Limits = field(default_factory=Limits)
    shim_version: str = "0.1.0"
    #: The wire version advertised in HELLO (a test knob: the version-mismatch
    #: scenario runs an agent that claims another major).
    protocol_version: str = CURRENT_TEXT
    #: Control mode: the folders DIRECTORY_LIST_REQUEST starts from.
    browse_roots: list[str] = field(default_factory=list)
    #: Where the audit key and the audit log live.
    state_dir: str | None = None
    #: Exit (code 5) after this many seconds without a data request; the
    #: control daemon sets it on the children it starts.
    idle_exit: float | None = None
    #: Control mode: the --idle-exit given to each session child.
    child_idle_exit: float = 600.0
    #: Rotate the audit log above this size.
    audit_max_bytes: int = 10 * 1024 * 1024
    #: Serial ports to advertise (hardware_serial): (path, description).
    serial_ports: list[tuple[str, str]] = field(default_factory=list)
    #: USB devices (hardware_usb): (vid, pid, description); GPIO lines
    #: (hardware_gpio): (chip:line, description). Advertised; no I/O.
    usb_devices: list[tuple[str, str, str]] = field(default_factory=list)
    gpio_lines: list[tuple[str, str]] = field(default_factory=list)
    #: Offer the serial I/O extension (`tetherbed.serial_io`) with the ports.
    serial_io: bool = True
    #: An Ollama-compatible backend (e.g. http://127.0.0.1:11434): probed at
    #: every connection; its models are advertised as local_llm_models.
    ollama_url: str | None = None
    #: Advertise only these of the backend's models (empty: all of them).
    ollama_models: list[str] = field(default_factory=list)
    #: The longest wait for the backend's next line (the first includes loading).
    ollama_timeout: float = 50.0
    #: FILE_DELETE moves entries into this freedesktop.org Trash folder
    #: (files/ and info/*.trashinfo) instead of unlinking them.
    recycle_bin: str | None = None
    #: The X display computer use drives (default: $DISPLAY); "" turns it off.
    display: str | None = None
    #: Let CLIPBOARD_READ return what the agent itself wrote in the last 30 s.
    clipboard_read_own: bool = False
    #: Write the simulator's event journal here (JSONL; see runtime/event_log.py).
    journal: str | None = None
    #: The strict profile (`--strict-wire`): imitate the public reference shim,
    #: which silently drops a frame its strict models refuse (docs/spec-notes.md).
    strict_wire: bool = False
    #: Deliberate bugs, for proving that the simulator's checkers catch them
    #: (see docs/scenarios.md). Never set in normal use.
    defects: frozenset[str] = frozenset()
