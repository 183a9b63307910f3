"""The messages of `crossdesk-automation/1` as typed models: every request and its answers.

`crossdesk.py` holds the spec's numbers; this module holds the shapes that use them,
so that whoever judges or fuzzes an adapter reads the spec's messages from one place.
A request is one JSON object whose `method` selects its parameters (a tagged union);
an action's `type` selects its fields the same way. Unknown fields are refused, as the
spec says ("Unknown fields and malformed arguments are rejected").

Bounds the spec gives (display 0-63, max_edge, timeout_ms, ticks, drag points and
duration, hotkey keys) are constraints here. Where it gives none (the length of an
operation id, of an origin), the bound is Tetherbed's reading, the one its adapter
enforces (docs/spec-notes.md); the spec's rules that a type cannot say (hotkey keys
unique, `type_text` at most 16 KiB of UTF-8, coordinates inside the observation) are
left to the adapter.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from tetherbed.wire import crossdesk

#: Request ids: nonnegative integers (the reference reads them as signed 64-bit).
RequestId = Annotated[int, Meta(ge=0, le=2**63 - 1)]
Device = Annotated[str, Meta(pattern=r"^[0-9]{9}$")]
DisplayIndex = Annotated[int, Meta(ge=0, le=crossdesk.DISPLAY_INDEX_MAX)]
#: Tickets, views and sessions: 24 random bytes as 32 base64url characters.
Id32 = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_-]{32}$")]
TimeoutMs = Annotated[int, Meta(ge=crossdesk.WAIT_TIMEOUT_MS[0], le=crossdesk.WAIT_TIMEOUT_MS[1])]
Coordinate = Annotated[float, Meta(ge=0)]
#: Key names: 1-32 characters (the adapter also wants them printable, unpadded).
KeyName = Annotated[str, Meta(min_length=1, max_length=32)]


class Request(Struct, kw_only=True, forbid_unknown_fields=True, tag_field="method"):
    """Base of every request: `id` and `method` (the tag)."""

    id: RequestId


class Hello(Request, kw_only=True, tag="hello"):
    protocol: Annotated[str, Meta(min_length=1, max_length=64)]


class Connect(Request, kw_only=True, tag="connect"):
    device: Device
    mode: Literal["observe", "control"]
    display: DisplayIndex
    decode_path: Literal["browser", "minirtc"] | msgspec.UnsetType = msgspec.UNSET
    decoder: Literal["auto", "software"] | msgspec.UnsetType = msgspec.UNSET


class Status(Request, kw_only=True, tag="status"):
    pass


class Region(Struct, kw_only=True, forbid_unknown_fields=True):
    x: Annotated[int, Meta(ge=0, le=65535)]
    y: Annotated[int, Meta(ge=0, le=65535)]
    width: Annotated[int, Meta(ge=1, le=65536)]
    height: Annotated[int, Meta(ge=1, le=65536)]


class Screenshot(Request, kw_only=True, tag="screenshot"):
    region: Region | msgspec.UnsetType = msgspec.UNSET
    max_edge: (
        Annotated[
            int, Meta(ge=crossdesk.SCREENSHOT_MAX_EDGE[0], le=crossdesk.SCREENSHOT_MAX_EDGE[1])
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    after_frame_id: Annotated[int, Meta(ge=0)] | msgspec.UnsetType = msgspec.UNSET
    generation: Annotated[int, Meta(ge=0)] | msgspec.UnsetType = msgspec.UNSET
    timeout_ms: TimeoutMs | msgspec.UnsetType = msgspec.UNSET


class Preview(Request, kw_only=True, tag="preview"):
    max_edge: (
        Annotated[int, Meta(ge=crossdesk.PREVIEW_MAX_EDGE[0], le=crossdesk.PREVIEW_MAX_EDGE[1])]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    after_frame_id: Annotated[int, Meta(ge=0)] | msgspec.UnsetType = msgspec.UNSET
    generation: Annotated[int, Meta(ge=0)] | msgspec.UnsetType = msgspec.UNSET
    timeout_ms: TimeoutMs | msgspec.UnsetType = msgspec.UNSET


class VideoOpen(Request, kw_only=True, tag="video_open"):
    ticket: Id32
    view: Id32
    view_generation: Annotated[int, Meta(ge=1, le=2**53 - 1)]
    session: Id32
    origin: Annotated[str, Meta(min_length=1, max_length=256)]
    apps: Annotated[str, Meta(min_length=1, max_length=256)] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )


class VideoRevoke(Request, kw_only=True, tag="video_revoke"):
    view: Id32 | msgspec.UnsetType = msgspec.UNSET


# --- actions ---------------------------------------------------------------------------


class ActionPayload(Struct, kw_only=True, forbid_unknown_fields=True, tag_field="type"):
    """Base of the `action` object: `type` selects the fields."""


Button = Literal["left", "right", "middle"]


class Move(ActionPayload, kw_only=True, tag="move"):
    x: Coordinate
    y: Coordinate


class Click(ActionPayload, kw_only=True, tag="click"):
    x: Coordinate
    y: Coordinate
    button: Button | msgspec.UnsetType = msgspec.UNSET


class DoubleClick(ActionPayload, kw_only=True, tag="double_click"):
    x: Coordinate
    y: Coordinate
    button: Button | msgspec.UnsetType = msgspec.UNSET


class ScrollAction(ActionPayload, kw_only=True, tag="scroll"):
    x: Coordinate
    y: Coordinate
    direction: Literal["up", "down", "left", "right"]
    ticks: (
        Annotated[int, Meta(ge=crossdesk.SCROLL_TICKS[0], le=crossdesk.SCROLL_TICKS[1])]
        | msgspec.UnsetType
    ) = msgspec.UNSET


class Point(Struct, kw_only=True, forbid_unknown_fields=True):
    x: Coordinate
    y: Coordinate


class Drag(ActionPayload, kw_only=True, tag="drag"):
    path: Annotated[
        list[Point], Meta(min_length=crossdesk.DRAG_POINTS[0], max_length=crossdesk.DRAG_POINTS[1])
    ]
    duration_ms: (
        Annotated[int, Meta(ge=crossdesk.DRAG_DURATION_MS[0], le=crossdesk.DRAG_DURATION_MS[1])]
        | msgspec.UnsetType
    ) = msgspec.UNSET


class KeyPress(ActionPayload, kw_only=True, tag="key_press"):
    key: KeyName


class Hotkey(ActionPayload, kw_only=True, tag="hotkey"):
    keys: Annotated[
        list[KeyName],
        Meta(min_length=crossdesk.HOTKEY_KEYS[0], max_length=crossdesk.HOTKEY_KEYS[1]),
    ]


class TypeText(ActionPayload, kw_only=True, tag="type_text"):
    text: Annotated[str, Meta(max_length=crossdesk.TYPE_TEXT_MAX_BYTES)]


ACTION_MODELS: tuple[type[ActionPayload], ...] = (
    Move,
    Click,
    DoubleClick,
    ScrollAction,
    Drag,
    KeyPress,
    Hotkey,
    TypeText,
)
AnyAction = Move | Click | DoubleClick | ScrollAction | Drag | KeyPress | Hotkey | TypeText


class ActionRequest(Request, kw_only=True, tag="action"):
    operation_id: Annotated[str, Meta(min_length=1, max_length=128)]
    observation_id: Annotated[str, Meta(min_length=1, max_length=64)]
    action: AnyAction


class Control(Request, kw_only=True, tag="control"):
    enabled: bool


class ViewerControl(Request, kw_only=True, tag="viewer_control"):
    operation: Literal["pause", "resume", "disconnect"]


class Display(Request, kw_only=True, tag="display"):
    index: DisplayIndex


class Cancel(Request, kw_only=True, tag="cancel"):
    request_id: RequestId


class Disconnect(Request, kw_only=True, tag="disconnect"):
    pass


class Exit(Request, kw_only=True, tag="exit"):
    pass


#: Every request model, by its method.
REQUEST_MODELS: dict[str, type[Request]] = {
    model.__struct_config__.tag: model  # type: ignore[misc]
    for model in (
        Hello,
        Connect,
        Status,
        Screenshot,
        VideoOpen,
        VideoRevoke,
        Preview,
        ActionRequest,
        Control,
        ViewerControl,
        Display,
        Cancel,
        Disconnect,
        Exit,
    )
}

#: Methods that end the adapter's process or its session: a fuzzer sending them at
#: random would measure little else.
ENDING_METHODS = frozenset({"exit"})

AnyRequest = (
    Hello
    | Connect
    | Status
    | Screenshot
    | VideoOpen
    | VideoRevoke
    | Preview
    | ActionRequest
    | Control
    | ViewerControl
    | Display
    | Cancel
    | Disconnect
    | Exit
)

# --- answers ----------------------------------------------------------------------------


class ErrorBody(Struct, kw_only=True):
    """The spec's three fields; a `message` for people may follow (unknown fields pass)."""

    code: Annotated[str, Meta(min_length=1)]
    retryable: bool
    side_effect_possible: bool


class OkResponse(Struct, kw_only=True):
    id: RequestId
    ok: Literal[True]
    result: dict[str, Any]


class ErrorResponse(Struct, kw_only=True):
    #: null when the request's id could not be read.
    id: RequestId | None
    ok: Literal[False]
    error: ErrorBody


#: Every answer model, by name.
RESPONSE_MODELS: dict[str, type[Struct]] = {"ok": OkResponse, "error": ErrorResponse}

_request_decoder = msgspec.json.Decoder(AnyRequest)


def decode_request(line: bytes | str) -> Request:
    """One request line as its model; msgspec.ValidationError or DecodeError when not one."""
    return _request_decoder.decode(line)


def is_valid_request(line: bytes | str) -> bool:
    try:
        decode_request(line)
    except (msgspec.MsgspecError, RecursionError):
        return False
    return True
