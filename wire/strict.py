"""The spec's messages exactly as it shows them: no other field, no looser type.

`messages.py` is lenient on purpose: it ignores unknown fields and carries a few
documented extensions. This module is its strict twin. Each struct has exactly
the fields the local-executor spec's examples show, with their JSON types, and
refuses any other; `null` is accepted only where the spec itself shows `null`.
An optional field may be left out (`UNSET`), never sent as `null` unless the
spec shows `null` for it.

It is what a strict peer accepts. The public reference shim validates with
pydantic models that forbid extra fields and silently drops a request it cannot
validate, so a frame that fails here is a frame such a peer never answers. Its
users: the tests of every frame Tetherbed's client and agent produce, the
agent's `--strict-wire` profile, and the conformance suite and fuzzers.

Where the spec gives only a signature (the computer-use messages specified in
full in COMPUTER_USE.md, which is not part of the protocol document), the shape
follows `messages.py` and is listed in `SIGNATURE_ONLY`. `tests/unit/wire/
test_strict.py` checks every struct against its lenient twin so that the two
cannot drift.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.messages import MessageType

#: A JSON number; msgspec decodes an integer into a float field too.
Number = float
Pair = Annotated[list[int], Meta(min_length=2, max_length=2)]
Rect = Annotated[list[int], Meta(min_length=4, max_length=4)]
Version = Annotated[str, Meta(pattern=r"^\d+\.\d+$")]


class Strict(Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every strict payload: unknown fields are an error."""


class Nothing(Strict, kw_only=True):
    """`{}`."""


# --- envelope -----------------------------------------------------------------


class StrictEnvelope(Struct, kw_only=True, forbid_unknown_fields=True):
    """The envelope; `pending_capacity` belongs on shim responses only."""

    type: str
    id: str | None
    ts: Number
    version: Version | UnsetType = UNSET
    pending_capacity: Annotated[int, Meta(ge=0)] | UnsetType | None = UNSET
    payload: msgspec.Raw


# --- handshake ----------------------------------------------------------------


class HardwareDevice(Strict, kw_only=True):
    type: str
    port: str | UnsetType = UNSET
    vid: str | UnsetType = UNSET
    pid: str | UnsetType = UNSET
    desc: str | UnsetType = UNSET


class Hello(Strict, kw_only=True):
    shim_version: str
    protocol_version: Version
    machine_id: str
    platform: Literal["darwin", "linux", "windows", "wsl2"]
    arch: Literal["x86_64", "arm64"]
    screen_resolution: Pair | None
    capabilities: list[str]
    allowed_root: str | None
    local_llm_models: list[str]
    hardware_devices: list[HardwareDevice]
    #: Named by the FEATURE_NOT_SUPPORTED rule ("not in HELLO.computer_use_features").
    computer_use_features: list[str] | UnsetType = UNSET


class HelloAck(Strict, kw_only=True):
    session_id: str | None
    connection_id: str | UnsetType | None = UNSET
    protocol_version: Version
    granted_capabilities: list[str]
    max_file_size_bytes: Annotated[int, Meta(gt=0)] | UnsetType = UNSET
    command_timeout_seconds: Annotated[Number, Meta(gt=0)] | UnsetType = UNSET
    max_concurrent: Annotated[int, Meta(gt=0)] | UnsetType = UNSET


# --- control plane --------------------------------------------------------------


class DirectoryEntry(Strict, kw_only=True):
    directory_ref: str
    name: str
    path: str


class DirectoryListRequest(Strict, kw_only=True):
    browse_id: str | None
    directory_ref: str | None
    #: "the caller can send it [next_cursor] with the same browse and directory references".
    cursor: str | UnsetType | None = UNSET


class DirectoryListResponse(Strict, kw_only=True):
    browse_id: str
    current: DirectoryEntry | None
    parent_ref: str | None
    entries: list[DirectoryEntry]
    next_cursor: str | None
    truncated: bool
    expires_at: Number


class AttachSession(Strict, kw_only=True):
    session_id: str
    browse_id: str
    directory_ref: str
    expected_connection_id: str | None


class SessionBinding(Strict, kw_only=True):
    session_id: str
    allowed_root: str
    fingerprint: str
    revision: int


class SessionAttached(SessionBinding, kw_only=True):
    root_grant: str


class ActivateSession(Strict, kw_only=True):
    session_id: str
    revision: int


class SessionActivated(SessionBinding, kw_only=True):
    pass


class RestoreSession(Strict, kw_only=True):
    session_id: str
    root_grant: str


class SessionRestored(SessionBinding, kw_only=True):
    root_grant: str


class DetachSession(Strict, kw_only=True):
    session_id: str


# --- shell ------------------------------------------------------------------------

ShellName = Literal["auto", "bash", "sh", "zsh", "pwsh", "powershell", "cmd"]


class ExecuteCommand(Strict, kw_only=True):
    #: "command" and "argv" are mutually exclusive; the example shows the unused one as null.
    command: str | UnsetType | None = UNSET
    argv: list[str] | UnsetType | None = UNSET
    shell: ShellName | UnsetType = UNSET
    cwd: str | UnsetType = UNSET
    timeout_seconds: Annotated[Number, Meta(gt=0)] | UnsetType = UNSET
    env: dict[str, str] | UnsetType = UNSET


class CommandResult(Strict, kw_only=True):
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    duration_seconds: Number
    output_truncated: bool


# --- files ------------------------------------------------------------------------

Encoding = Literal["utf-8", "base64"]


class FileRead(Strict, kw_only=True):
    path: str
    encoding: Encoding | UnsetType = UNSET
    format: Literal["text", "bytes"] | UnsetType = UNSET
    offset: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    length: Annotated[int, Meta(ge=0)] | UnsetType | None = UNSET


class FileContents(Strict, kw_only=True):
    content: str
    encoding: Encoding
    size_bytes: int
    truncated: bool


class FileWrite(Strict, kw_only=True):
    path: str
    content: str
    encoding: Encoding | UnsetType = UNSET
    create_parents: bool | UnsetType = UNSET


class Ack(Strict, kw_only=True):
    ok: bool
    #: "APP_LAUNCH → ACK with pid".
    pid: int | UnsetType = UNSET


class FileStat(Strict, kw_only=True):
    path: str
    follow_symlinks: bool | UnsetType = UNSET


class FileStatResponse(Strict, kw_only=True):
    """`exists: false` leaves every other field null, except perhaps `path`."""

    exists: bool
    is_file: bool | None
    is_dir: bool | None
    is_symlink: bool | None
    size_bytes: int | None
    mtime: Number | None
    ctime: Number | None
    mode: str | None
    owner_uid: int | None
    owner_gid: int | None
    mime_type: str | None
    path: str | None


class FileList(Strict, kw_only=True):
    path: str
    glob: str | UnsetType | None = UNSET
    recursive: bool | UnsetType = UNSET
    include_hidden: bool | UnsetType = UNSET
    max_entries: Annotated[int, Meta(gt=0)] | UnsetType = UNSET


class FileEntry(Strict, kw_only=True):
    name: str
    path: str
    is_file: bool
    is_dir: bool
    is_symlink: bool
    size_bytes: int
    mtime: Number


class FileListResponse(Strict, kw_only=True):
    entries: list[FileEntry]
    truncated: bool


class FileDelete(Strict, kw_only=True):
    path: str
    recursive: bool | UnsetType = UNSET
    missing_ok: bool | UnsetType = UNSET


class FileMove(Strict, kw_only=True):
    src: str
    dst: str
    overwrite: bool | UnsetType = UNSET


# --- local LLM ----------------------------------------------------------------------


class ChatMessage(Strict, kw_only=True):
    role: str  # unknown roles are to be ignored, not refused
    content: str


class LocalLlmCompletion(Strict, kw_only=True):
    model: str
    messages: list[ChatMessage]
    max_tokens: Annotated[int, Meta(gt=0)] | UnsetType = UNSET
    temperature: Number | UnsetType = UNSET
    top_p: Number | UnsetType = UNSET
    stream: bool | UnsetType = UNSET


FinishReason = Literal["stop", "length", "content_filter"]


class LocalLlmCompletionChunk(Strict, kw_only=True):
    delta: str
    finish_reason: FinishReason | None


class TokenCounts(Strict, kw_only=True):
    prompt: int | None
    completion: int | None
    total: int | None


class LocalLlmCompletionResponse(Strict, kw_only=True):
    content: str
    finish_reason: FinishReason
    tokens: TokenCounts
    duration_seconds: Number


# --- computer use -------------------------------------------------------------------


class ScreenshotRequest(Strict, kw_only=True):
    monitor: int | UnsetType = UNSET
    quality: Annotated[int, Meta(ge=1, le=100)] | UnsetType = UNSET
    region: Rect | UnsetType | None = UNSET
    window_id: str | UnsetType | None = UNSET
    format: Literal["jpeg", "png"] | UnsetType = UNSET
    include_cursor: bool | UnsetType = UNSET


class ScreenshotMeta(Strict, kw_only=True):
    origin: Pair
    display_id: int


class ScreenshotResponse(Strict, kw_only=True):
    image_base64: str
    mime_type: str
    width: int
    height: int
    monitor: int
    region: Rect | None
    display_scale: Number
    logical_size: Pair
    meta: ScreenshotMeta


InputKind = Literal[
    "left_click",
    "right_click",
    "double_click",
    "middle_click",
    "triple_click",
    "mouse_move",
    "mouse_down",
    "mouse_up",
    "drag",
    "type",
    "key",
    "hold_key",
    "scroll",
    "wait",
]


class InputAction(Strict, kw_only=True):
    action: InputKind
    coordinate: Pair | UnsetType | None = UNSET
    text: str | UnsetType | None = UNSET
    key: str | UnsetType | None = UNSET
    direction: Literal["up", "down"] | UnsetType | None = UNSET
    clicks: int | UnsetType | None = UNSET
    button: Literal["left", "middle", "right"] | UnsetType | None = UNSET
    modifiers: list[Literal["shift", "ctrl", "alt", "super"]] | UnsetType | None = UNSET
    scroll_amount: int | UnsetType | None = UNSET
    scroll_direction: str | UnsetType | None = UNSET
    duration_ms: int | UnsetType | None = UNSET
    path: list[Pair] | UnsetType | None = UNSET
    paste: bool | UnsetType = UNSET
    preserve_clipboard: bool | UnsetType = UNSET


class CursorPositionResponse(Strict, kw_only=True):
    x: int
    y: int
    monitor: int


class DisplayDescription(Strict, kw_only=True):
    index: int
    primary: bool
    physical_size: Pair
    logical_size: Pair
    scale: Number
    origin: Pair


class DisplayInfoResponse(Strict, kw_only=True):
    displays: list[DisplayDescription]


class WindowDescription(Strict, kw_only=True):
    window_id: str
    title: str
    app: str | UnsetType | None = UNSET
    pid: int | UnsetType | None = UNSET
    bounds: Rect | UnsetType | None = UNSET
    focused: bool | UnsetType = UNSET


class WindowListResponse(Strict, kw_only=True):
    windows: list[WindowDescription]


class WindowFocus(Strict, kw_only=True):
    window_id: str


class AppDescription(Strict, kw_only=True):
    name: str
    exec: str | UnsetType | None = UNSET


class AppListResponse(Strict, kw_only=True):
    apps: list[AppDescription]


class AppLaunch(Strict, kw_only=True):
    app: str
    args: list[str] | UnsetType = UNSET


class ClipboardReadResponse(Strict, kw_only=True):
    text: str


class ClipboardWrite(Strict, kw_only=True):
    text: str


class PermissionsCheckResponse(Strict, kw_only=True):
    permissions: dict[str, str]


# --- session, health, errors ---------------------------------------------------------


class SessionRevoked(Strict, kw_only=True):
    reason: str  # unknown future reasons are to be tolerated
    new_shim_machine_id: str | UnsetType = UNSET


class Status(Strict, kw_only=True):
    in_flight: int
    max_concurrent: int
    queue_depth: int
    audit_log_bytes: int
    uptime_seconds: Number


class ErrorPayload(Strict, kw_only=True):
    code: str
    message: str
    fatal: bool
    details: dict[str, Any] | UnsetType = UNSET


T = MessageType

#: The strict payload of every message type whose payload the spec defines.
#: The reserved recording messages have none: a strict peer refuses them all.
STRICT_MODELS: dict[MessageType, type[Struct]] = {
    T.HELLO: Hello,
    T.HELLO_ACK: HelloAck,
    T.DIRECTORY_LIST_REQUEST: DirectoryListRequest,
    T.DIRECTORY_LIST_RESPONSE: DirectoryListResponse,
    T.ATTACH_SESSION: AttachSession,
    T.SESSION_ATTACHED: SessionAttached,
    T.ACTIVATE_SESSION: ActivateSession,
    T.SESSION_ACTIVATED: SessionActivated,
    T.RESTORE_SESSION: RestoreSession,
    T.SESSION_RESTORED: SessionRestored,
    T.DETACH_SESSION: DetachSession,
    T.EXECUTE_COMMAND: ExecuteCommand,
    T.COMMAND_RESULT: CommandResult,
    T.FILE_READ: FileRead,
    T.FILE_CONTENTS: FileContents,
    T.FILE_WRITE: FileWrite,
    T.FILE_STAT: FileStat,
    T.FILE_STAT_RESPONSE: FileStatResponse,
    T.FILE_LIST: FileList,
    T.FILE_LIST_RESPONSE: FileListResponse,
    T.FILE_DELETE: FileDelete,
    T.FILE_MOVE: FileMove,
    T.ACK: Ack,
    T.LOCAL_LLM_COMPLETION: LocalLlmCompletion,
    T.LOCAL_LLM_COMPLETION_CHUNK: LocalLlmCompletionChunk,
    T.LOCAL_LLM_COMPLETION_RESPONSE: LocalLlmCompletionResponse,
    T.SCREENSHOT_REQUEST: ScreenshotRequest,
    T.SCREENSHOT_RESPONSE: ScreenshotResponse,
    T.INPUT_ACTION: InputAction,
    T.CURSOR_POSITION_REQUEST: Nothing,
    T.CURSOR_POSITION_RESPONSE: CursorPositionResponse,
    T.DISPLAY_INFO_REQUEST: Nothing,
    T.DISPLAY_INFO_RESPONSE: DisplayInfoResponse,
    T.WINDOW_LIST_REQUEST: Nothing,
    T.WINDOW_LIST_RESPONSE: WindowListResponse,
    T.WINDOW_FOCUS: WindowFocus,
    T.APP_LIST_REQUEST: Nothing,
    T.APP_LIST_RESPONSE: AppListResponse,
    T.APP_LAUNCH: AppLaunch,
    T.CLIPBOARD_READ: Nothing,
    T.CLIPBOARD_READ_RESPONSE: ClipboardReadResponse,
    T.CLIPBOARD_WRITE: ClipboardWrite,
    T.PERMISSIONS_CHECK_REQUEST: Nothing,
    T.PERMISSIONS_CHECK_RESPONSE: PermissionsCheckResponse,
    T.SESSION_REVOKED: SessionRevoked,
    T.STATUS: Status,
    T.PING: Nothing,
    T.PONG: Nothing,
    T.ERROR: ErrorPayload,
}

#: Types whose full schema lives in COMPUTER_USE.md; their shape here follows
#: `messages.py` (the protocol document gives only their signatures).
SIGNATURE_ONLY: frozenset[MessageType] = frozenset(
    {
        T.CURSOR_POSITION_RESPONSE,
        T.DISPLAY_INFO_RESPONSE,
        T.WINDOW_LIST_RESPONSE,
        T.WINDOW_FOCUS,
        T.APP_LIST_RESPONSE,
        T.APP_LAUNCH,
        T.CLIPBOARD_READ_RESPONSE,
        T.CLIPBOARD_WRITE,
        T.PERMISSIONS_CHECK_RESPONSE,
    }
)

#: The error codes the spec names (`ERROR.payload.code` of a strict shim).
SPEC_ERROR_CODES: frozenset[str] = frozenset(str(code) for code in ErrorCode)

_envelope = msgspec.json.Decoder(StrictEnvelope)
_payloads = {kind: msgspec.json.Decoder(model) for kind, model in STRICT_MODELS.items()}


class StrictViolation(ValueError):
    """A frame a strict peer would refuse; the message names the field."""


def check_frame(data: bytes | str, *, from_shim: bool) -> StrictEnvelope:
    """Validate one whole frame; raise StrictViolation naming what is wrong.

    `from_shim` says which side sent it: only the shim's frames may carry
    `pending_capacity`, and only the shim's ERRORs must use the spec's codes.
    """
    try:
        envelope = _envelope.decode(data)
    except msgspec.MsgspecError as exc:
        raise StrictViolation(f"envelope: {exc}") from None
    try:
        kind = MessageType(envelope.type)
    except ValueError:
        raise StrictViolation(f"unknown message type {envelope.type!r}") from None
    if not from_shim and envelope.pending_capacity not in (UNSET, None):
        # "omitted (or null) on platform-to-shim requests"
        raise StrictViolation("pending_capacity on a platform frame")
    payload = check_payload(kind, envelope.payload)
    if from_shim and isinstance(payload, ErrorPayload) and payload.code not in SPEC_ERROR_CODES:
        raise StrictViolation(f"error code {payload.code!r} is not one of the spec's")
    return envelope


def check_payload(kind: MessageType | str, payload: bytes | msgspec.Raw) -> Struct:
    """Decode `payload` with the strict model of `kind`; raise StrictViolation."""
    decoder = _payloads.get(kind)  # type: ignore[call-overload]
    if decoder is None:
        raise StrictViolation(f"{kind} has no payload the spec defines")
    try:
        return decoder.decode(payload)
    except msgspec.MsgspecError as exc:
        raise StrictViolation(f"{kind} payload: {exc}") from None


def accepts(kind: MessageType | str, payload: bytes | msgspec.Raw) -> bool:
    """Would a strict peer accept this payload for `kind`?"""
    try:
        check_payload(kind, payload)
    except StrictViolation:
        return False
    return True
