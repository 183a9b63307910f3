"""INPUT_ACTION: validate every field first, then drive the display.

Nothing moves until the whole action has been checked - every coordinate and
path point inside a display, known buttons, keys and modifiers, durations
within command_timeout_seconds - so a rejected action has no partial effect.
`wait` never reaches this module: it is a sleep on the agent's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from tetherbed.agent.computer_use.bounds import check_point
from tetherbed.agent.computer_use.clipboard import ClipboardPolicy
from tetherbed.agent.computer_use.paste import paste_text
from tetherbed.agent.config import Limits
from tetherbed.agent.desktop.capture import Monitor
from tetherbed.agent.desktop.session import DesktopSession
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import InputAction

#: Action -> the computer_use_features entry it needs.
ACTION_FEATURES: dict[str, str] = {
    "left_click": "input.click",
    "right_click": "input.click",
    "middle_click": "input.click",
    "double_click": "input.click",
    "triple_click": "input.click",
    "mouse_move": "input.move",
    "mouse_down": "input.button",
    "mouse_up": "input.button",
    "drag": "input.drag",
    "type": "input.type",
    "key": "input.key",
    "hold_key": "input.hold_key",
    "scroll": "input.scroll",
    "wait": "input.wait",
}

#: Click actions -> (button, count).
CLICKS: dict[str, tuple[str, int]] = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}
BUTTON_NAMES = ("left", "middle", "right")
SCROLL_DIRECTIONS = ("up", "down", "left", "right")
MODIFIER_NAMES = ("shift", "ctrl", "alt", "super")
#: Drag duration when the request gives none.
DEFAULT_DRAG_MS = 300
#: Scroll notches when the request gives neither clicks nor scroll_amount.
DEFAULT_SCROLL_CLICKS = 1

T = TypeVar("T")


def invalid(message: str) -> ProtocolError:
    return ProtocolError(ExtensionCode.INVALID_MESSAGE, message)


@dataclass(frozen=True, slots=True)
class Scroll:
    direction: str
    clicks: int


def feature_of(action: InputAction) -> str:
    feature = ACTION_FEATURES.get(action.action)
    if feature is None:
        raise invalid(f"unknown INPUT_ACTION action {action.action!r}")
    if action.action == "type" and action.paste:
        return "input.paste"
    return feature


def wait_seconds(action: InputAction, limits: Limits) -> float:
    return _duration_s(action, limits, required=True, default_ms=0)


def perform(
    action: InputAction,
    session: DesktopSession,
    monitors: Sequence[Monitor],
    limits: Limits,
    clipboard: ClipboardPolicy,
) -> None:
    """Blocking: validate, then perform one action (not `wait`)."""
    kind = action.action
    point = _point(action, monitors)
    if kind in CLICKS:
        button, count = CLICKS[kind]
        modifiers = _modifiers(action)
        x, y = point if point is not None else (None, None)
        session.input.click(x, y, button=button, count=count, modifiers=modifiers)
    elif kind == "mouse_move":
        if point is None:
            raise invalid("mouse_move needs a coordinate")
        session.input.move(*point)
    elif kind in ("mouse_down", "mouse_up"):
        button = _button(action)
        x, y = point if point is not None else (None, None)
        if kind == "mouse_down":
            session.input.button_down(button, x, y)
        else:
            session.input.button_up(button, x, y)
    elif kind == "drag":
        path = _drag_path(action, monitors, session)
        seconds = _duration_s(action, limits, required=False, default_ms=DEFAULT_DRAG_MS)
        session.input.drag(path, seconds, _button(action))
    elif kind == "type":
        if action.text is None:
            raise invalid("type needs text")
        if action.paste:
            paste_text(session, clipboard, action.text, preserve=action.preserve_clipboard)
        else:
            session.input.type_text(action.text)
    elif kind == "key":
        if not action.key:
            raise invalid("key needs a key, e.g. 'ctrl+s'")
        session.input.key(action.key)
    elif kind == "hold_key":
        if not action.key:
            raise invalid("hold_key needs a key")
        seconds = _duration_s(action, limits, required=True, default_ms=0)
        session.input.hold_key(action.key, seconds)
    elif kind == "scroll":
        scroll = _scroll(action)
        x, y = point if point is not None else (None, None)
        session.input.scroll(x, y, scroll.direction, scroll.clicks, modifiers=_modifiers(action))
    else:
        raise invalid(f"unknown INPUT_ACTION action {kind!r}")


def _point(action: InputAction, monitors: Sequence[Monitor]) -> tuple[int, int] | None:
    if action.coordinate is None:
        return None
    return check_point(monitors, action.coordinate)


def _button(action: InputAction) -> str:
    button = action.button or "left"
    if button not in BUTTON_NAMES:
        raise invalid(f"unknown button {button!r}; use one of {list(BUTTON_NAMES)}")
    return button


def _modifiers(action: InputAction) -> tuple[str, ...]:
    names = tuple(action.modifiers or ())
    unknown = [m for m in names if m not in MODIFIER_NAMES]
    if unknown:
        raise invalid(f"unknown modifiers {unknown}; use a subset of {list(MODIFIER_NAMES)}")
    return names


def _scroll(action: InputAction) -> Scroll:
    direction = _one_of("direction", action.direction, action.scroll_direction)
    clicks = _one_of("clicks", action.clicks, action.scroll_amount)
    if direction is None:
        raise invalid("scroll needs direction (or scroll_direction)")
    if direction not in SCROLL_DIRECTIONS:
        raise invalid(f"unknown scroll direction {direction!r}; use {list(SCROLL_DIRECTIONS)}")
    return Scroll(direction, clicks if clicks is not None else DEFAULT_SCROLL_CLICKS)


def _one_of(name: str, primary: T | None, alternative: T | None) -> T | None:
    """The spec gives two spellings; both may be sent only if they agree."""
    if primary is not None and alternative is not None and primary != alternative:
        raise invalid(f"scroll got two different values for {name}: {primary!r}, {alternative!r}")
    return primary if primary is not None else alternative


def _drag_path(
    action: InputAction, monitors: Sequence[Monitor], session: DesktopSession
) -> list[tuple[int, int]]:
    if action.path:
        points = [check_point(monitors, p) for p in action.path]
    elif action.coordinate is not None:  # drag from where the pointer is to `coordinate`
        points = [session.input.cursor(), check_point(monitors, action.coordinate)]
    else:
        raise invalid("drag needs a path of [x, y] points (or a coordinate to drag to)")
    if len(points) < 2:
        raise invalid("a drag path needs at least two points")
    return points


def _duration_s(action: InputAction, limits: Limits, *, required: bool, default_ms: int) -> float:
    if action.duration_ms is None and required:
        raise invalid(f"{action.action} needs duration_ms")
    ms = action.duration_ms if action.duration_ms is not None else default_ms
    seconds = ms / 1000
    if seconds > limits.command_timeout_seconds:
        raise invalid(
            f"duration_ms {ms} exceeds command_timeout_seconds "
            f"({limits.command_timeout_seconds:g} s)"
        )
    return seconds
