"""INPUT_ACTION and the pointer/display queries through ComputerUse, proven by the probe app."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.desktop.conftest import ProbeApp
from tests.desktop.helpers import clear_entry
from tetherbed.agent.computer_use.service import ComputerUse
from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    Ack,
    CursorPositionResponse,
    DisplayInfoResponse,
    Empty,
    InputAction,
    MessageType,
)

pytestmark = pytest.mark.xvfb

ROOT_RECT = {"index": 0, "primary": True, "rect": [0, 0, 1920, 1080]}


async def act(cu: ComputerUse, **fields: object) -> None:
    kind, response = await cu.run(MessageType.INPUT_ACTION, InputAction(**fields))  # type: ignore[arg-type]
    assert (kind, response) == (MessageType.ACK, Ack(ok=True))


async def test_left_click_lands(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    x, y = probe_app.center("button")
    mark = probe_app.events.mark()
    await act(computer_use, action="left_click", coordinate=[x, y])
    probe_app.events.wait_for(lambda e: e["type"] == "button_command", since=mark)
    _, position = await computer_use.run(MessageType.CURSOR_POSITION_REQUEST, Empty())
    assert position == CursorPositionResponse(x=x, y=y, monitor=0)


@pytest.mark.parametrize(
    ("action", "button", "count"),
    [("right_click", 3, 1), ("middle_click", 2, 1), ("double_click", 1, 2), ("triple_click", 1, 3)],
)
async def test_click_kinds(
    computer_use: ComputerUse, probe_app: ProbeApp, action: str, button: int, count: int
) -> None:
    x, y = probe_app.center("canvas")
    mark = probe_app.events.mark()
    await act(computer_use, action=action, coordinate=[x, y], modifiers=["alt"])
    probe_app.events.wait_for(
        lambda e: len(probe_app.events.of_type("button_release", since=mark)) >= count,
        since=mark,
    )
    presses = probe_app.events.of_type("button_press", since=mark)
    assert [p["button"] for p in presses] == [button] * count
    assert all(p["state"] & 8 for p in presses)  # Mod1 = alt


async def test_move_down_up(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    x, y = probe_app.center("canvas")
    mark = probe_app.events.mark()
    await act(computer_use, action="mouse_move", coordinate=[x, y])
    await act(computer_use, action="mouse_down", button="left")
    await act(computer_use, action="mouse_move", coordinate=[x + 60, y + 30])
    await act(computer_use, action="mouse_up", button="left", coordinate=[x + 80, y + 40])
    drag = probe_app.events.wait_for(lambda e: e["type"] == "drag", since=mark)
    assert drag["path"][0] == [x, y] and drag["path"][-1] == [x + 80, y + 40]


async def test_drag_with_path(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    x, y = probe_app.center("canvas")
    path = [[x - 100, y], [x + 100, y], [x + 100, y + 80]]
    mark = probe_app.events.mark()
    await act(computer_use, action="drag", path=path, duration_ms=150)
    drag = probe_app.events.wait_for(lambda e: e["type"] == "drag", since=mark)
    assert drag["path"][0] == path[0] and drag["path"][-1] == path[-1]
    assert [x + 100, y] in drag["path"]


@pytest.mark.parametrize("paste", [False, True])
async def test_type(computer_use: ComputerUse, probe_app: ProbeApp, paste: bool) -> None:
    text = "héllo wörld ✓ 日本"
    clear_entry(computer_use.session.input, probe_app)
    mark = probe_app.events.mark()
    await act(computer_use, action="type", text=text, paste=paste)
    probe_app.events.wait_for(lambda e: e["type"] == "text" and e["text"] == text, since=mark)


async def test_key_and_hold_key(computer_use: ComputerUse, probe_app: ProbeApp) -> None:
    clear_entry(computer_use.session.input, probe_app)
    await act(computer_use, action="type", text="ab")
    mark = probe_app.events.mark()
    await act(computer_use, action="key", key="BackSpace")
    probe_app.events.wait_for(lambda e: e["type"] == "text" and e["text"] == "a", since=mark)
    started = time.monotonic()
    await act(computer_use, action="hold_key", key="shift", duration_ms=200)
    assert time.monotonic() - started >= 0.19
    probe_app.events.wait_for(
        lambda e: e["type"] == "key_release" and e["keysym"] == "Shift_L", since=mark
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"direction": "down", "clicks": 2},
        {"scroll_direction": "down", "scroll_amount": 2},
        {"direction": "down", "scroll_amount": 2},
    ],
)
async def test_scroll_spellings(
    computer_use: ComputerUse, probe_app: ProbeApp, fields: dict
) -> None:
    x, y = probe_app.center("canvas")
    mark = probe_app.events.mark()
    await act(computer_use, action="scroll", coordinate=[x, y], **fields)
    probe_app.events.wait_for(
        lambda e: len(probe_app.events.of_type("button_release", since=mark)) >= 2, since=mark
    )
    assert [e["button"] for e in probe_app.events.of_type("button_press", since=mark)] == [5, 5]


async def test_wait_sleeps_on_the_clock(computer_use: ComputerUse) -> None:
    started = time.monotonic()
    await act(computer_use, action="wait", duration_ms=120)
    assert time.monotonic() - started >= 0.11


@pytest.mark.parametrize(
    ("fields", "details"),
    [
        ({"action": "left_click", "coordinate": [1920, 10]}, {"coordinate": [1920, 10]}),
        ({"action": "mouse_move", "coordinate": [5, -1]}, {"coordinate": [5, -1]}),
        ({"action": "drag", "path": [[10, 10], [10, 5000]]}, {"coordinate": [10, 5000]}),
        ({"action": "scroll", "coordinate": [99999, 0], "direction": "up"}, None),
    ],
)
async def test_out_of_bounds_lists_the_displays(
    computer_use: ComputerUse, probe_app: ProbeApp, fields: dict, details: dict | None
) -> None:
    mark = probe_app.events.mark()
    with pytest.raises(ProtocolError) as caught:
        await act(computer_use, **fields)
    assert caught.value.code == "INPUT_OUT_OF_BOUNDS"
    assert caught.value.details is not None
    assert caught.value.details["displays"] == [ROOT_RECT]
    if details:
        assert {k: caught.value.details[k] for k in details} == details
    assert probe_app.events.of_type("button_press", since=mark) == []  # nothing happened


@pytest.mark.parametrize(
    "fields",
    [
        {"action": "fly"},
        {"action": "mouse_move"},
        {"action": "key"},
        {"action": "key", "key": "ctrl+nosuchkey"},
        {"action": "type"},
        {"action": "type", "text": "bell\x07"},
        {"action": "hold_key", "key": "shift"},
        {"action": "hold_key", "key": "shift", "duration_ms": 3_600_000},
        {"action": "scroll", "direction": "sideways"},
        {"action": "scroll", "direction": "up", "scroll_direction": "down"},
        {"action": "left_click", "modifiers": ["hyper"]},
        {"action": "mouse_down", "button": "fourth"},
        {"action": "drag", "path": [[1, 1]]},
        {"action": "wait"},
    ],
)
async def test_invalid_actions(computer_use: ComputerUse, fields: dict) -> None:
    with pytest.raises(ProtocolError) as caught:
        await act(computer_use, **fields)
    assert caught.value.code == "INVALID_MESSAGE", caught.value.message


async def test_features_gate_actions(xvfb: XvfbDisplay) -> None:
    cu = ComputerUse(xvfb.name, clock=SystemClock(), features=["screenshot", "input.click"])
    try:
        with pytest.raises(ProtocolError) as caught:
            await act(cu, action="type", text="x", paste=True)
    finally:
        await cu.close()
    assert caught.value.code == "FEATURE_NOT_SUPPORTED"
    assert caught.value.details == {"feature": "input.paste"}


async def test_display_info(computer_use: ComputerUse) -> None:
    kind, info = await computer_use.run(MessageType.DISPLAY_INFO_REQUEST, Empty())
    assert kind is MessageType.DISPLAY_INFO_RESPONSE
    assert isinstance(info, DisplayInfoResponse)
    [display] = info.displays
    assert (display.index, display.primary, display.origin) == (0, True, [0, 0])
    assert display.physical_size == display.logical_size == [1920, 1080]
    assert display.scale == 1.0


async def test_a_cancelled_action_releases_what_it_held(
    computer_use: ComputerUse, probe_app: ProbeApp
) -> None:
    mark = probe_app.events.mark()
    task = asyncio.ensure_future(
        act(computer_use, action="hold_key", key="shift", duration_ms=20_000)
    )
    await asyncio.to_thread(
        probe_app.events.wait_for,
        lambda e: e["type"] == "key_press" and e["keysym"] == "Shift_L",
        since=mark,
    )
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(
        probe_app.events.wait_for,
        lambda e: e["type"] == "key_release" and e["keysym"] == "Shift_L",
        since=mark,
    )
    assert time.monotonic() - started < 3
