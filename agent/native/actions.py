"""Action payloads: strict parsing, and planning into input steps in display coordinates.

Planning is pure: an action plus the observation's mapping gives a list of steps.
Timed steps (drag) become explicit `Wait` steps so that the owner loop, not a
blocking driver call, advances time, and cancellation can land between steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.validate import Fields

BUTTONS = ("left", "right", "middle")
DIRECTIONS = ("up", "down", "left", "right")
MAX_TEXT_BYTES = 16 * 1024
DEFAULT_SCROLL_TICKS = 3
DEFAULT_DRAG_MS = 500
TEXT_CHUNK_CHARS = 32  # typing is split so that cancel can interrupt long text


@dataclass(frozen=True, slots=True)
class Pointer:
    kind: str  # move | click | double_click
    x: float
    y: float
    button: str = "left"


@dataclass(frozen=True, slots=True)
class Scroll:
    x: float
    y: float
    direction: str
    ticks: int


@dataclass(frozen=True, slots=True)
class Drag:
    path: tuple[tuple[float, float], ...]
    duration_ms: int


@dataclass(frozen=True, slots=True)
class KeyPress:
    key: str


@dataclass(frozen=True, slots=True)
class Hotkey:
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TypeText:
    text: str


Action = Pointer | Scroll | Drag | KeyPress | Hotkey | TypeText


def _key_name(value: object, path: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 32 or not value.isprintable():
        raise NativeError(
            Code.INVALID_ARGUMENT, f"`{path}` must be a key name of 1 to 32 characters"
        )
    if value != value.strip():
        raise NativeError(Code.INVALID_ARGUMENT, f"`{path}` must not have surrounding spaces")
    return value


def parse_action(fields: Fields) -> Action:
    """Validate `action` completely; unknown fields and bad values are refused."""
    kind = fields.choice(
        "type",
        ("move", "click", "double_click", "scroll", "drag", "key_press", "hotkey", "type_text"),
    )
    action: Action
    if kind == "move":
        action = Pointer("move", fields.number("x"), fields.number("y"))
    elif kind in ("click", "double_click"):
        x, y = fields.number("x"), fields.number("y")
        action = Pointer(kind, x, y, fields.choice("button", BUTTONS, default="left"))
    elif kind == "scroll":
        x, y = fields.number("x"), fields.number("y")
        direction = fields.choice("direction", DIRECTIONS)
        action = Scroll(x, y, direction, fields.int("ticks", 1, 10, default=DEFAULT_SCROLL_TICKS))
    elif kind == "drag":
        points = []
        for index, item in enumerate(fields.list("path", 2, 128)):
            point = Fields(item, f"action.path[{index}]")
            points.append((point.number("x"), point.number("y")))
            point.finish()
        action = Drag(tuple(points), fields.int("duration_ms", 100, 2000, default=DEFAULT_DRAG_MS))
    elif kind == "key_press":
        action = KeyPress(_key_name(fields.raw("key"), "action.key"))
    elif kind == "hotkey":
        raw = fields.list("keys", 2, 6)
        keys = tuple(_key_name(k, f"action.keys[{i}]") for i, k in enumerate(raw))
        if len({k.lower() for k in keys}) != len(keys):
            raise NativeError(Code.INVALID_ARGUMENT, "`action.keys` must be unique")
        action = Hotkey(keys)
    else:
        text = fields.str("text", max_len=MAX_TEXT_BYTES)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise NativeError(Code.INVALID_ARGUMENT, "`action.text` is not valid Unicode") from None
        if size > MAX_TEXT_BYTES:
            raise NativeError(Code.INVALID_ARGUMENT, "`action.text` exceeds 16 KiB of UTF-8")
        action = TypeText(text)
    fields.finish()
    return action


# Steps the runner executes; coordinates are display-global pixels.
@dataclass(frozen=True, slots=True)
class Step:
    op: str  # move | click | scroll | down | up | wait | key | hotkey | type
    x: int = 0
    y: int = 0
    button: str = "left"
    count: int = 1
    direction: str = ""
    ticks: int = 0
    seconds: float = 0.0
    key: str = ""
    keys: tuple[str, ...] = ()
    text: str = ""

    @property
    def sends_input(self) -> bool:
        return self.op != "wait"


Mapper = Callable[[float, float], tuple[int, int]]


def plan(action: Action, to_display: Mapper) -> list[Step]:
    """Steps for one action. `to_display` checks bounds and maps image → display pixels."""
    if isinstance(action, Pointer):
        x, y = to_display(action.x, action.y)
        if action.kind == "move":
            return [Step("move", x, y)]
        count = 2 if action.kind == "double_click" else 1
        return [Step("click", x, y, button=action.button, count=count)]
    if isinstance(action, Scroll):
        x, y = to_display(action.x, action.y)
        return [Step("scroll", x, y, direction=action.direction, ticks=action.ticks)]
    if isinstance(action, Drag):
        points = [to_display(px, py) for px, py in action.path]
        interval = action.duration_ms / 1000 / (len(points) - 1)
        steps = [Step("move", *points[0]), Step("down", *points[0])]
        for px, py in points[1:]:
            steps += [Step("wait", seconds=interval), Step("move", px, py)]
        steps.append(Step("up", *points[-1]))
        return steps
    if isinstance(action, KeyPress):
        return [Step("key", key=action.key)]
    if isinstance(action, Hotkey):
        return [Step("hotkey", keys=action.keys)]
    text = action.text
    return [
        Step("type", text=text[i : i + TEXT_CHUNK_CHARS])
        for i in range(0, len(text), TEXT_CHUNK_CHARS)
    ]
