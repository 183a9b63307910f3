"""InputDriver on a real display: every action is proven by what the probe app reports."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest

from tests.desktop.conftest import ProbeApp
from tests.desktop.helpers import clear_entry, near
from tetherbed.agent.desktop.errors import InputCancelled
from tetherbed.agent.desktop.input import InputDriver
from tetherbed.agent.desktop.xdisplay import open_display
from tetherbed.agent.desktop.xvfb import XvfbDisplay

pytestmark = pytest.mark.xvfb

SHIFT_MASK, CONTROL_MASK = 1, 4


@pytest.fixture(scope="module")
def driver(xvfb: XvfbDisplay) -> Iterator[InputDriver]:
    with InputDriver(xvfb.name) as d:
        yield d


def test_click_lands_on_the_button(driver: InputDriver, probe_app: ProbeApp) -> None:
    x, y = probe_app.center("button")
    mark = probe_app.events.mark()
    driver.click(x, y)
    probe_app.events.wait_for(lambda e: e["type"] == "button_command", since=mark)
    press = probe_app.events.of_type("button_press", since=mark)[0]
    assert (press["x"], press["y"], press["button"], press["widget"]) == (x, y, 1, "button")
    assert driver.cursor() == (x, y)


@pytest.mark.parametrize(("button", "number"), [("right", 3), ("middle", 2)])
def test_other_buttons(driver: InputDriver, probe_app: ProbeApp, button: str, number: int) -> None:
    x, y = probe_app.center("canvas")
    mark = probe_app.events.mark()
    driver.click(x, y, button=button)
    release = probe_app.events.wait_for(
        lambda e: e["type"] == "button_release" and e["button"] == number, since=mark
    )
    assert (release["x"], release["y"]) == (x, y)


def test_double_click_and_modifiers(driver: InputDriver, probe_app: ProbeApp) -> None:
    x, y = probe_app.center("canvas")
    mark = probe_app.events.mark()
    driver.click(x, y, count=2, modifiers=("shift", "ctrl"))
    probe_app.events.wait_for(
        lambda e: e["type"] == "key_release" and e["keysym"] == "Shift_L", since=mark
    )
    presses = probe_app.events.of_type("button_press", since=mark)
    assert len(presses) == 2
    assert all(p["state"] & SHIFT_MASK and p["state"] & CONTROL_MASK for p in presses)


@pytest.mark.parametrize(
    "text",
    [
        "Hello, World! 0123456789 ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./",
        "héllo wörld ✓ 日本",
        "Ελληνικά — Русский — 日本語のテキスト ★☆♠♣♥♦ çéèêëàâäîïôöûüÿñ",
    ],
    ids=["ascii", "mixed", "many-distinct"],
)
def test_type_text_arrives_exactly(driver: InputDriver, probe_app: ProbeApp, text: str) -> None:
    clear_entry(driver, probe_app)
    mark = probe_app.events.mark()
    driver.type_text(text)
    probe_app.events.wait_for(lambda e: e["type"] == "text" and e["text"] == text, since=mark)


def test_key_combos(driver: InputDriver, probe_app: ProbeApp) -> None:
    clear_entry(driver, probe_app)
    driver.type_text("abc")
    mark = probe_app.events.mark()
    driver.key("BackSpace")
    probe_app.events.wait_for(lambda e: e["type"] == "text" and e["text"] == "ab", since=mark)
    mark = probe_app.events.mark()
    driver.key("ctrl+a")  # Tk entry: to line start
    driver.hotkey(["shift", "x"])
    probe_app.events.wait_for(lambda e: e["type"] == "text" and e["text"] == "Xab", since=mark)
    press = probe_app.events.of_type("key_press", since=mark)
    assert any(p["keysym"] == "a" and p["state"] & CONTROL_MASK for p in press)


def test_drag_follows_the_path(driver: InputDriver, probe_app: ProbeApp) -> None:
    x, y, _, _ = probe_app.rect("canvas")
    path = [(x + 40, y + 40), (x + 400, y + 40), (x + 400, y + 300), (x + 100, y + 200)]
    mark = probe_app.events.mark()
    driver.drag(path, 0.3)
    drag = probe_app.events.wait_for(lambda e: e["type"] == "drag", since=mark)
    reported = drag["path"]
    assert reported[0] == list(path[0]) and reported[-1] == list(path[-1])
    for corner in path:  # every corner was visited
        assert any(near(p, corner, 2) for p in reported), corner
    for p in reported:  # nothing strayed from the polyline
        assert min(_distance_to_path(p, path)) <= 3, p


def _distance_to_path(p: list[int], path: list[tuple[int, int]]) -> list[float]:
    out = []
    for (x0, y0), (x1, y1) in itertools.pairwise(path):
        dx, dy = x1 - x0, y1 - y0
        t = max(0.0, min(1.0, ((p[0] - x0) * dx + (p[1] - y0) * dy) / (dx * dx + dy * dy)))
        out.append(((p[0] - x0 - t * dx) ** 2 + (p[1] - y0 - t * dy) ** 2) ** 0.5)
    return out


def test_scroll_sends_wheel_buttons(driver: InputDriver, probe_app: ProbeApp) -> None:
    x, y = probe_app.center("canvas")
    mark = probe_app.events.mark()
    driver.scroll(x, y, "down", 3)
    driver.scroll(x, y, "left", 1)
    probe_app.events.wait_for(
        lambda e: len(probe_app.events.of_type("button_release", since=mark)) >= 4, since=mark
    )
    presses = probe_app.events.of_type("button_press", since=mark)
    # Tk reports the horizontal wheel (X buttons 6/7) as buttons 4/5 with Shift
    assert [(e["button"], e["state"] & SHIFT_MASK) for e in presses] == [
        (5, 0),
        (5, 0),
        (5, 0),
        (4, SHIFT_MASK),
    ]


def _server_state(display: str) -> tuple[int, list[int]]:
    """(pointer button mask, keycodes down) as the X server sees them."""
    connection = open_display(display)
    try:
        mask = connection.screen().root.query_pointer().mask
        keymap = connection.query_keymap()
    finally:
        connection.close()
    down = [i * 8 + b for i, byte in enumerate(keymap) for b in range(8) if byte & (1 << b)]
    return mask, down


def test_release_all_releases_a_held_button(
    xvfb: XvfbDisplay, driver: InputDriver, probe_app: ProbeApp
) -> None:
    x, y = probe_app.center("canvas")
    mark = probe_app.events.mark()
    driver.button_down("left", x, y)
    probe_app.events.wait_for(lambda e: e["type"] == "button_press", since=mark)
    assert _server_state(xvfb.name)[0] & (1 << 8)  # Button1Mask
    driver.release_all()
    probe_app.events.wait_for(
        lambda e: e["type"] == "button_release" and e["button"] == 1, since=mark
    )
    assert not _server_state(xvfb.name)[0] & (0x1F << 8)
    assert driver.held() == (frozenset(), frozenset())


def test_release_all_cuts_a_hold_key_short(
    xvfb: XvfbDisplay, driver: InputDriver, probe_app: ProbeApp
) -> None:
    driver.click(*probe_app.center("entry"))
    mark = probe_app.events.mark()
    outcome: list[BaseException | None] = []

    def hold() -> None:
        try:
            driver.hold_key("shift", 20)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=hold)
    thread.start()
    probe_app.events.wait_for(
        lambda e: e["type"] == "key_press" and e["keysym"] == "Shift_L", since=mark
    )
    assert _server_state(xvfb.name)[1], "shift should be down"
    started = time.monotonic()
    driver.release_all()
    thread.join(5)
    assert time.monotonic() - started < 2
    assert isinstance(outcome[0], InputCancelled)
    probe_app.events.wait_for(
        lambda e: e["type"] == "key_release" and e["keysym"] == "Shift_L", since=mark
    )
    assert _server_state(xvfb.name)[1] == []


def test_click_while_a_key_is_held(driver: InputDriver, probe_app: ProbeApp) -> None:
    """hold_key leaves the driver free: shift+click by two concurrent calls."""
    mark = probe_app.events.mark()
    thread = threading.Thread(target=driver.hold_key, args=("shift", 0.6))
    thread.start()
    probe_app.events.wait_for(
        lambda e: e["type"] == "key_press" and e["keysym"] == "Shift_L", since=mark
    )
    driver.click(*probe_app.center("canvas"))
    thread.join(5)
    press = probe_app.events.wait_for(lambda e: e["type"] == "button_press", since=mark)
    assert press["state"] & SHIFT_MASK
