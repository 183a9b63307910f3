"""Typed payload models for every message type of the local-executor spec.

Each model is a msgspec Struct. Decoding ignores unknown fields (forward
compatibility within a major version) and rejects missing or mistyped ones.
Field names and defaults follow the spec's JSON examples.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from tetherbed.wire import limits

PositiveInt = Annotated[int, Meta(gt=0)]
NonNegativeInt = Annotated[int, Meta(ge=0)]
PositiveNumber = Annotated[float, Meta(gt=0)]
Point = Annotated[list[int], Meta(min_length=2, max_length=2)]
Rect = Annotated[list[int], Meta(min_length=4, max_length=4)]


class MessageType(StrEnum):
    HELLO = "HELLO"
    HELLO_ACK = "HELLO_ACK"
    # control plane
    DIRECTORY_LIST_REQUEST = "DIRECTORY_LIST_REQUEST"
    DIRECTORY_LIST_RESPONSE = "DIRECTORY_LIST_RESPONSE"
    ATTACH_SESSION = "ATTACH_SESSION"
    SESSION_ATTACHED = "SESSION_ATTACHED"
    ACTIVATE_SESSION = "ACTIVATE_SESSION"
    SESSION_ACTIVATED = "SESSION_ACTIVATED"
    RESTORE_SESSION = "RESTORE_SESSION"
    SESSION_RESTORED = "SESSION_RESTORED"
    DETACH_SESSION = "DETACH_SESSION"
    # shell
    EXECUTE_COMMAND = "EXECUTE_COMMAND"
    COMMAND_RESULT = "COMMAND_RESULT"
    # files
    FILE_READ = "FILE_READ"
    FILE_CONTENTS = "FILE_CONTENTS"
    FILE_WRITE = "FILE_WRITE"
    FILE_STAT = "FILE_STAT"
    FILE_STAT_RESPONSE = "FILE_STAT_RESPONSE"
    FILE_LIST = "FILE_LIST"
    FILE_LIST_RESPONSE = "FILE_LIST_RESPONSE"
    FILE_DELETE = "FILE_DELETE"
    FILE_MOVE = "FILE_MOVE"
    ACK = "ACK"
    # local LLM
    LOCAL_LLM_COMPLETION = "LOCAL_LLM_COMPLETION"
    LOCAL_LLM_COMPLETION_CHUNK = "LOCAL_LLM_COMPLETION_CHUNK"
    LOCAL_LLM_COMPLETION_RESPONSE = "LOCAL_LLM_COMPLETION_RESPONSE"
    # computer use
    SCREENSHOT_REQUEST = "SCREENSHOT_REQUEST"
    SCREENSHOT_RESPONSE = "SCREENSHOT_RESPONSE"
    INPUT_ACTION = "INPUT_ACTION"
    CURSOR_POSITION_REQUEST = "CURSOR_POSITION_REQUEST"
    CURSOR_POSITION_RESPONSE = "CURSOR_POSITION_RESPONSE"
    DISPLAY_INFO_REQUEST = "DISPLAY_INFO_REQUEST"
    DISPLAY_INFO_RESPONSE = "DISPLAY_INFO_RESPONSE"
    WINDOW_LIST_REQUEST = "WINDOW_LIST_REQUEST"
    WINDOW_LIST_RESPONSE = "WINDOW_LIST_RESPONSE"
    WINDOW_FOCUS = "WINDOW_FOCUS"
    APP_LIST_REQUEST = "APP_LIST_REQUEST"
    APP_LIST_RESPONSE = "APP_LIST_RESPONSE"
    APP_LAUNCH = "APP_LAUNCH"
    CLIPBOARD_READ = "CLIPBOARD_READ"
    CLIPBOARD_READ_RESPONSE = "CLIPBOARD_READ_RESPONSE"
    CLIPBOARD_WRITE = "CLIPBOARD_WRITE"
    PERMISSIONS_CHECK_REQUEST = "PERMISSIONS_CHECK_REQUEST"
    PERMISSIONS_CHECK_RESPONSE = "PERMISSIONS_CHECK_RESPONSE"
    # recording: reserved design preview, never advertised
    REQUEST_RECORDING_CONSENT = "REQUEST_RECORDING_CONSENT"
    START_RECORDING = "START_RECORDING"
    STOP_RECORDING = "STOP_RECORDING"
    RECORDING_FETCH = "RECORDING_FETCH"
    APPLY_RECORDING_REVIEW = "APPLY_RECORDING_REVIEW"
    RECORDING_STEP = "RECORDING_STEP"
    # session, health, errors
    SESSION_REVOKED = "SESSION_REVOKED"
    STATUS = "STATUS"
    PING = "PING"
    PONG = "PONG"
    ERROR = "ERROR"


class Capability(StrEnum):
    DIRECTORY_BROWSE = "directory_browse"
    SHELL = "shell"
    FILES = "files"
    COMPUTER_USE = "computer_use"
    LOCAL_LLM = "local_llm"
    HARDWARE_SERIAL = "hardware_serial"
    HARDWARE_USB = "hardware_usb"
    HARDWARE_GPIO = "hardware_gpio"
    RECORDING = "recording"


class Payload(Struct, kw_only=True):
    """Base of every payload model."""


class Empty(Payload, kw_only=True):
    """A payload with no fields: `{}`."""


# --- handshake ---------------------------------------------------------------


class HardwareDevice(Struct, kw_only=True, omit_defaults=True):
    type: str
    port: str | None = None
    vid: str | None = None
    pid: str | None = None
    desc: str | None = None


class Hello(Payload, kw_only=True):
    shim_version: str
    protocol_version: str
    machine_id: Annotated[str, Meta(min_length=1, max_length=256)]
    platform: str
    arch: str
    screen_resolution: Point | None = None
    capabilities: list[str] = []
    allowed_root: str | None = None
    local_llm_models: list[str] = []
    hardware_devices: list[HardwareDevice] = []
    computer_use_features: list[str] | None = None


class HelloAck(Payload, kw_only=True):
    session_id: str | None
    connection_id: str | None = None
    protocol_version: str
    granted_capabilities: list[str]
    max_file_size_bytes: PositiveInt = limits.DEFAULT_MAX_FILE_SIZE_BYTES
    command_timeout_seconds: PositiveNumber = limits.DEFAULT_COMMAND_TIMEOUT_SECONDS
    max_concurrent: PositiveInt = limits.DEFAULT_MAX_CONCURRENT


# --- control plane -----------------------------------------------------------


class DirectoryEntry(Struct, kw_only=True):
    directory_ref: str
    name: str
    path: str


class DirectoryListRequest(Payload, kw_only=True):
    browse_id: str | None = None
    directory_ref: str | None = None
    cursor: str | None = None


class DirectoryListResponse(Payload, kw_only=True):
    browse_id: str
    current: DirectoryEntry | None
    parent_ref: str | None
    entries: list[DirectoryEntry]
    next_cursor: str | None
    truncated: bool
    expires_at: float


class AttachSession(Payload, kw_only=True):
    session_id: Annotated[str, Meta(min_length=1)]
    browse_id: str
    directory_ref: str
    expected_connection_id: str | None = None


class SessionBinding(Payload, kw_only=True):
    session_id: str
    allowed_root: str
    fingerprint: str
    revision: int


class SessionAttached(SessionBinding, kw_only=True):
    root_grant: str


class ActivateSession(Payload, kw_only=True):
    session_id: Annotated[str, Meta(min_length=1)]
    revision: PositiveInt


class SessionActivated(SessionBinding, kw_only=True):
    pass


class RestoreSession(Payload, kw_only=True):
    session_id: Annotated[str, Meta(min_length=1)]
    root_grant: str


class SessionRestored(SessionBinding, kw_only=True):
    root_grant: str


class DetachSession(Payload, kw_only=True):
    session_id: Annotated[str, Meta(min_length=1)]


# --- shell -------------------------------------------------------------------

ShellName = Literal["auto", "bash", "sh", "zsh", "pwsh", "powershell", "cmd"]


class ExecuteCommand(Payload, kw_only=True):
    command: str | None = None
    argv: Annotated[list[str], Meta(min_length=1)] | None = None
    shell: ShellName = "auto"
    cwd: str | None = None
    timeout_seconds: PositiveNumber | None = None
    env: dict[str, str] | None = None


class CommandResult(Payload, kw_only=True):
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    duration_seconds: float
    output_truncated: bool


# --- files -------------------------------------------------------------------

Encoding = Literal["utf-8", "base64"]
Format = Literal["text", "bytes"]


class FileRead(Payload, kw_only=True):
    path: str
    encoding: Encoding = "utf-8"
    format: Format | None = None
    offset: NonNegativeInt = 0
    length: NonNegativeInt | None = None


class FileContents(Payload, kw_only=True):
    content: str
    encoding: Encoding
    size_bytes: int
    truncated: bool


class FileWrite(Payload, kw_only=True):
    path: str
    content: str
    encoding: Encoding = "utf-8"
    format: Format | None = None
    create_parents: bool = False


class Ack(Payload, kw_only=True, omit_defaults=True):
    ok: bool  # required, so that omit_defaults never drops it
    pid: int | None = None


class FileStat(Payload, kw_only=True):
    path: str
    follow_symlinks: bool = True


class FileStatResponse(Payload, kw_only=True):
    exists: bool
    is_file: bool | None = None
    is_dir: bool | None = None
    is_symlink: bool | None = None
    size_bytes: int | None = None
    mtime: float | None = None
    ctime: float | None = None
    mode: str | None = None
    owner_uid: int | None = None
    owner_gid: int | None = None
    mime_type: str | None = None
    path: str | None = None


class FileList(Payload, kw_only=True):
    path: str
    glob: str | None = None
    recursive: bool = False
    include_hidden: bool = False
    max_entries: PositiveInt = limits.DEFAULT_LIST_MAX_ENTRIES


class FileEntry(Struct, kw_only=True):
    name: str
    path: str
    is_file: bool
    is_dir: bool
    is_symlink: bool
    size_bytes: int
    mtime: float


class FileListResponse(Payload, kw_only=True):
    entries: list[FileEntry]
    truncated: bool


class FileDelete(Payload, kw_only=True):
    path: str
    recursive: bool = False
    missing_ok: bool = False


class FileMove(Payload, kw_only=True):
    src: str
    dst: str
    overwrite: bool = False


# --- local LLM ---------------------------------------------------------------


class ChatMessage(Struct, kw_only=True):
    role: str
    content: str


class LocalLlmCompletion(Payload, kw_only=True):
    model: str
    messages: list[ChatMessage]
    max_tokens: PositiveInt | None = None
    temperature: Annotated[float, Meta(ge=0)] | None = None
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    stream: bool = True


class LocalLlmCompletionChunk(Payload, kw_only=True):
    delta: str
    finish_reason: str | None = None


class TokenCounts(Struct, kw_only=True):
    prompt: int | None = None
    completion: int | None = None
    total: int | None = None


class LocalLlmCompletionResponse(Payload, kw_only=True):
    content: str
    finish_reason: str
    tokens: TokenCounts | None = None
    duration_seconds: float = 0.0


# --- computer use ------------------------------------------------------------


class ScreenshotRequest(Payload, kw_only=True):
    monitor: int = 0
    quality: Annotated[int, Meta(ge=1, le=100)] = 75
    region: Rect | None = None
    window_id: str | None = None
    format: Literal["jpeg", "png"] = "jpeg"
    include_cursor: bool = True


class ScreenshotMeta(Struct, kw_only=True):
    origin: Point
    display_id: int


class ScreenshotResponse(Payload, kw_only=True):
    image_base64: str
    mime_type: str
    width: int
    height: int
    monitor: int
    region: Rect | None
    display_scale: float
    logical_size: Point
    meta: ScreenshotMeta


class InputAction(Payload, kw_only=True):
    action: str
    coordinate: Point | None = None
    text: str | None = None
    key: str | None = None
    direction: str | None = None
    clicks: PositiveInt | None = None
    button: str | None = None
    modifiers: list[str] | None = None
    scroll_amount: PositiveInt | None = None
    scroll_direction: str | None = None
    duration_ms: NonNegativeInt | None = None
    path: list[Point] | None = None
    paste: bool = False
    preserve_clipboard: bool = False


class CursorPositionResponse(Payload, kw_only=True):
    x: int
    y: int
    monitor: int


class DisplayDescription(Struct, kw_only=True):
    index: int
    primary: bool
    physical_size: Point
    logical_size: Point
    scale: float
    origin: Point


class DisplayInfoResponse(Payload, kw_only=True):
    displays: list[DisplayDescription]


class WindowDescription(Struct, kw_only=True):
    window_id: str
    title: str
    app: str | None = None
    pid: int | None = None
    bounds: Rect | None = None
    focused: bool = False


class WindowListResponse(Payload, kw_only=True):
    windows: list[WindowDescription]


class WindowFocus(Payload, kw_only=True):
    window_id: str


class AppDescription(Struct, kw_only=True):
    name: str
    exec: str | None = None


class AppListResponse(Payload, kw_only=True):
    apps: list[AppDescription]


class AppLaunch(Payload, kw_only=True):
    app: str
    args: list[str] = []


class ClipboardReadResponse(Payload, kw_only=True):
    text: str


class ClipboardWrite(Payload, kw_only=True):
    text: str


class PermissionsCheckResponse(Payload, kw_only=True):
    permissions: dict[str, str]


# --- session, health, errors -------------------------------------------------


class SessionRevoked(Payload, kw_only=True):
    reason: str
    new_shim_machine_id: str | None = None


class Status(Payload, kw_only=True):
    in_flight: int
    max_concurrent: int
    queue_depth: int = 0
    audit_log_bytes: int = 0
    uptime_seconds: float = 0.0


class ErrorPayload(Payload, kw_only=True):
    code: str
    message: str = ""
    fatal: bool = False
    details: dict[str, Any] | None = None


class Reserved(Payload, kw_only=True):
    """Recording messages: reserved by the spec, their payloads not yet defined."""


#: The payload model of every message type.
PAYLOAD_MODELS: dict[MessageType, type[Payload]] = {
    MessageType.HELLO: Hello,
    MessageType.HELLO_ACK: HelloAck,
    MessageType.DIRECTORY_LIST_REQUEST: DirectoryListRequest,
    MessageType.DIRECTORY_LIST_RESPONSE: DirectoryListResponse,
    MessageType.ATTACH_SESSION: AttachSession,
    MessageType.SESSION_ATTACHED: SessionAttached,
    MessageType.ACTIVATE_SESSION: ActivateSession,
    MessageType.SESSION_ACTIVATED: SessionActivated,
    MessageType.RESTORE_SESSION: RestoreSession,
    MessageType.SESSION_RESTORED: SessionRestored,
    MessageType.DETACH_SESSION: DetachSession,
    MessageType.EXECUTE_COMMAND: ExecuteCommand,
    MessageType.COMMAND_RESULT: CommandResult,
    MessageType.FILE_READ: FileRead,
    MessageType.FILE_CONTENTS: FileContents,
    MessageType.FILE_WRITE: FileWrite,
    MessageType.FILE_STAT: FileStat,
    MessageType.FILE_STAT_RESPONSE: FileStatResponse,
    MessageType.FILE_LIST: FileList,
    MessageType.FILE_LIST_RESPONSE: FileListResponse,
    MessageType.FILE_DELETE: FileDelete,
    MessageType.FILE_MOVE: FileMove,
    MessageType.ACK: Ack,
    MessageType.LOCAL_LLM_COMPLETION: LocalLlmCompletion,
    MessageType.LOCAL_LLM_COMPLETION_CHUNK: LocalLlmCompletionChunk,
    MessageType.LOCAL_LLM_COMPLETION_RESPONSE: LocalLlmCompletionResponse,
    MessageType.SCREENSHOT_REQUEST: ScreenshotRequest,
    MessageType.SCREENSHOT_RESPONSE: ScreenshotResponse,
    MessageType.INPUT_ACTION: InputAction,
    MessageType.CURSOR_POSITION_REQUEST: Empty,
    MessageType.CURSOR_POSITION_RESPONSE: CursorPositionResponse,
    MessageType.DISPLAY_INFO_REQUEST: Empty,
    MessageType.DISPLAY_INFO_RESPONSE: DisplayInfoResponse,
    MessageType.WINDOW_LIST_REQUEST: Empty,
    MessageType.WINDOW_LIST_RESPONSE: WindowListResponse,
    MessageType.WINDOW_FOCUS: WindowFocus,
    MessageType.APP_LIST_REQUEST: Empty,
    MessageType.APP_LIST_RESPONSE: AppListResponse,
    MessageType.APP_LAUNCH: AppLaunch,
    MessageType.CLIPBOARD_READ: Empty,
    MessageType.CLIPBOARD_READ_RESPONSE: ClipboardReadResponse,
    MessageType.CLIPBOARD_WRITE: ClipboardWrite,
    MessageType.PERMISSIONS_CHECK_REQUEST: Empty,
    MessageType.PERMISSIONS_CHECK_RESPONSE: PermissionsCheckResponse,
    MessageType.REQUEST_RECORDING_CONSENT: Reserved,
    MessageType.START_RECORDING: Reserved,
    MessageType.STOP_RECORDING: Reserved,
    MessageType.RECORDING_FETCH: Reserved,
    MessageType.APPLY_RECORDING_REVIEW: Reserved,
    MessageType.RECORDING_STEP: Reserved,
    MessageType.SESSION_REVOKED: SessionRevoked,
    MessageType.STATUS: Status,
    MessageType.PING: Empty,
    MessageType.PONG: Empty,
    MessageType.ERROR: ErrorPayload,
}

assert set(PAYLOAD_MODELS) == set(MessageType), "every message type needs a model"


def to_builtins(payload: Payload) -> Any:
    """A payload as plain JSON-compatible Python objects (for logs and tests)."""
    return msgspec.to_builtins(payload)
