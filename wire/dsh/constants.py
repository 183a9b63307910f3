"""Every number, name and path the dsh-computers spec fixes, in one place.

Section numbers (§) are those of the spec (npm dsh-computers 1.3.0, PROTOCOL.md).
Values the spec leaves open and Tetherbed chose are marked "reading" and
explained in docs/spec-notes.md.
"""

from __future__ import annotations

KiB = 1024
MiB = 1024 * KiB

#: The version of the spec this package implements (PROTOCOL.md "v1", package 1.3.0).
SPEC_VERSION = "1.3.0"
#: `/state`'s `version` field (§4.1) and the persisted record version (§2, §10.2).
STATE_VERSION = 2
RECORD_VERSION = 1

# --- routes (§3, §4, §10.5, §11) ---------------------------------------------

BASE_PATH = "/api/dsh-computers"


class Route:
    """Paths below BASE_PATH."""

    ENROLL = "/agent/enroll"
    EVENTS = "/agent/events"
    RESULTS = "/agent/results"
    RESULTS_CHUNK = "/agent/results/chunk"
    HEARTBEAT = "/agent/heartbeat"
    FS_RESULT = "/agent/fs/result"
    STATE = "/state"
    KEYS = "/keys"
    KEY_STATUS = "/key-status"
    DELETE = "/delete"
    RENAME = "/rename"
    JOIN_SH = "/join.sh"
    JOIN_PS1 = "/join.ps1"
    #: The spec's Node agent download; Tetherbed's hub answers it 404 (reading).
    AGENT_MJS = "/agent.mjs"
    #: Tetherbed's agent download: a standalone Python zipapp (reading).
    AGENT_PYZ = "/agent.pyz"
    HEALTH = "/health"
    RUNTIME = "/runtime"
    RUNTIME_CONNECT = "/runtime/connect"
    RUNTIME_ENABLE = "/runtime/enable"
    RUNTIME_DISCONNECT = "/runtime/disconnect"
    #: The settings page (§7) and its static files (reading: the spec's page is a
    #: plugin of another product; Tetherbed's hub serves a plain page here).
    SETTINGS_PAGE = "/settings"
    UI_ASSETS = "/ui"


def url(route: str) -> str:
    """The absolute path of a route, e.g. url(Route.ENROLL)."""
    return BASE_PATH + route


# --- credentials (§2) --------------------------------------------------------

#: Enrollment keys and agent tokens: "dshc_" + base64url of 32 random bytes.
CREDENTIAL_PREFIX = "dshc_"
CREDENTIAL_RANDOM_BYTES = 32
#: base64url of 32 bytes without padding.
CREDENTIAL_BODY_CHARS = 43
COMPUTER_ID_PREFIX = "cmp_"
COMPUTER_ID_HEX_CHARS = 12
EXEC_REQUEST_PREFIX = "req_"
FS_REQUEST_PREFIX = "fsr_"
#: Reading: background job ids (§11.2 names the registry, not the id format).
JOB_ID_PREFIX = "job_"

KEY_TTL_MINUTES = 15
#: Used or expired keys may be dropped this long after (§2 "Prune").
PRUNE_AFTER_SECONDS = 3600

# --- timing (§3.2, §4.3, §6, §7, §8, §11) ------------------------------------

HEARTBEAT_MS = 20_000
SSE_RETRY_MS = 2000
EXEC_TIMEOUT_MS = 120_000
KEY_STATUS_POLL_MS = 2000
STATE_POLL_MS = 5000
RUNTIME_POLL_MS = 5000
#: Streaming: a chunk batch is sent at most this often, or when it is this big.
CHUNK_BATCH_MS = 100
CHUNK_BATCH_BYTES = 32 * KiB
#: §11.6.2: a silent streaming command emits a heartbeat frame this often.
SILENT_HEARTBEAT_MS = 10_000
#: §11.3: per-request timeout of a remote file operation.
FS_TIMEOUT_MS = 15_000
#: §6: the agent prints a heartbeat log line at most this often.
AGENT_LOG_HEARTBEAT_S = 60
#: §6: the enroll command proves the round trip by holding the stream this long.
ENROLL_PROBE_S = 5

#: §6 reconnect backoff "1 s → 30 s (jitter)". Reading: the delay before
#: attempt n (from 0) is min(2^n · 1 s, 30 s) scaled by a uniform factor in
#: [1 - JITTER, 1 + JITTER], then clamped to [1 s, 30 s] (wire/dsh/backoff.py).
RECONNECT_BASE_S = 1.0
RECONNECT_CAP_S = 30.0
RECONNECT_JITTER = 0.2
#: Reading: a stream counts as healthy, and resets the schedule, once it has
#: delivered `hello` and stayed open this long.
RECONNECT_HEALTHY_AFTER_S = 10.0

# --- limits (§3.1, §6, §8, §11.3) --------------------------------------------

ENROLL_BODY_LIMIT = 16 * KiB
#: §8 maxOutputBytes, and §6 "cap each stream at 1 MiB".
MAX_OUTPUT_BYTES = 1 * MiB
TRUNCATION_MARKER = "\n[output truncated]"
#: §7 rename: 1-64 visible characters, trimmed.
NAME_MAX_CHARS = 64
#: Reading: body limits the spec does not give (docs/spec-notes.md).
#: results carries two capped 1 MiB buffers; JSON escaping may cost 6 bytes a byte.
RESULTS_BODY_LIMIT = 16 * MiB
#: one batch of at most 32 KiB per stream, base64 (4/3) plus the envelope.
CHUNK_BODY_LIMIT = 256 * KiB
HEARTBEAT_BODY_LIMIT = 16 * KiB
#: a 1 MiB text read or a 5 000-entry listing, escaped.
FS_RESULT_BODY_LIMIT = 16 * MiB
BROWSER_BODY_LIMIT = 16 * KiB
#: a computer_write of 4 MiB of text, escaped.
TOOL_BODY_LIMIT = 32 * MiB
#: Reading: the agent's SSE reader refuses a single event over this (a 4 MiB
#: write travels base64 inside one `fs` event).
SSE_EVENT_LIMIT = 8 * MiB

FS_READ_MAX_BYTES = 1 * MiB
FS_READ_MAX_LINES = 20_000
FS_READ_DEFAULT_LINES = 2000
FS_WRITE_MAX_BYTES = 4 * MiB
FS_LIST_MAX_ENTRIES = 5000
FS_GLOB_MAX_PATHS = 2000
FS_GREP_MAX_MATCHES = 500
#: Reading: grep skips files larger than this (it reads each whole).
FS_GREP_MAX_FILE_BYTES = 8 * MiB
#: Reading: a rendered tool answer is capped near this many characters (§5.2).
RENDER_MAX_CHARS = 20_000

#: Agent log rotation (§6).
AGENT_LOG_ROTATE_BYTES = 5 * MiB

# --- SSE events (§3.2, §11.3, §11.4) -----------------------------------------


class Event:
    HELLO = "hello"
    EXEC = "exec"
    CANCEL = "cancel"
    PING = "ping"
    CONFIG = "config"
    FS = "fs"
    #: Reserved for v1.4 (§11.4); Tetherbed sends none of them.
    PTY_OPEN = "pty.open"
    PTY_INPUT = "pty.input"
    PTY_RESIZE = "pty.resize"
    PTY_CLOSE = "pty.close"


SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
JSON_CONTENT_TYPE = "application/json; charset=utf-8"
SSE_HEADERS = {
    "Content-Type": SSE_CONTENT_TYPE,
    "Cache-Control": "no-store",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}

# --- capabilities and features (§11.1, §11.5) --------------------------------


class Capability:
    EXEC = "exec"
    FS = "fs"
    PTY = "pty"


CAPABILITIES = (Capability.EXEC, Capability.FS, Capability.PTY)
#: §11.1: "A computer with no reported capabilities is treated as ["exec"]".
DEFAULT_CAPABILITIES = (Capability.EXEC,)


class Feature:
    STREAM = "stream"
    FS = "fs"
    PTY = "pty"


FS_OPS = ("read", "write", "list", "stat", "mkdir", "rename", "delete", "glob", "grep")

# --- error codes (§3, §4, §10.5, §11.6) --------------------------------------


class ErrorCode:
    INVALID_KEY = "invalid-key"
    KEY_EXPIRED = "key-expired"
    KEY_USED = "key-used"
    BAD_REQUEST = "bad-request"
    UNKNOWN_REQUEST = "unknown-request"
    NOT_FOUND = "not-found"
    UNADMITTED = "unadmitted"
    INVALID_TOKEN = "invalid-token"
    HUB_UNREACHABLE = "hub-unreachable"
    #: Reading: codes the spec does not name (docs/spec-notes.md).
    TOO_LARGE = "too-large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported-media-type"
    NOT_AVAILABLE = "not-available"


#: Model-tool errors (the client API's `error.code`); the spec only asks for
#: messages "the model can act on" (§5.2), these let a program branch.
class ToolErrorCode:
    UNKNOWN_COMPUTER = "unknown-computer"
    AMBIGUOUS_COMPUTER = "ambiguous-computer"
    OFFLINE = "computer-offline"
    WENT_OFFLINE = "computer-went-offline"
    EXEC_DISABLED = "exec-disabled"
    UPDATE_REQUIRED = "update-required"
    UNSUPPORTED = "capability-missing"
    TIMEOUT = "timeout"
    ABORTED = "aborted"
    INVALID_ARGUMENTS = "invalid-arguments"
    UNKNOWN_TOOL = "unknown-tool"
    UNKNOWN_JOB = "unknown-job"
    FILE_ERROR = "file-error"
    EDIT_NO_MATCH = "edit-no-match"
    EDIT_AMBIGUOUS = "edit-ambiguous"
    TOO_LARGE = "too-large"


# --- OS names (§2, §4.2, §6) -------------------------------------------------

#: Key `os` tabs (§4.2).
KEY_OS = ("macos", "windows", "linux")
#: node os.platform() → platformLabel (§2).
PLATFORM_LABELS = {"darwin": "macOS", "linux": "Linux", "win32": "Windows"}
UNKNOWN_PLATFORM_LABEL = "Unknown"


class Role:
    """§10.1."""

    HUB = "hub"
    RUNTIME = "runtime"
    BOTH = "both"


ROLES = (Role.HUB, Role.RUNTIME, Role.BOTH)

# --- the agent's files (§6, §4.6) --------------------------------------------

AGENT_HOME_ENV = "DSH_COMPUTERS_HOME"
AGENT_HOME_DIR = ".dsh-computers"
AGENT_CONFIG_FILE = "config.json"
AGENT_LOG_FILE = "agent.log"
#: Reading: Tetherbed's agent file that join.sh downloads (the spec's is agent.mjs).
AGENT_BUNDLE_FILE = "agent.pyz"
SYSTEMD_UNIT = "dsh-computers-agent.service"
LAUNCHD_LABEL = "com.dsh.computers.agent"
#: The runtime's local state in the hub's state directory (§10.2).
RUNTIME_FILE = "runtime.json"
#: Reading: the agent needs Python 3.11 (the spec's needs Node 22).
AGENT_MIN_PYTHON = (3, 11)
