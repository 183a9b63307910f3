"""Actions through the real adapter land on the probe app: click, text, drag, refusals."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.native.harness import NativeProcess, ProbeApp

pytestmark = pytest.mark.xvfb


@pytest.fixture(scope="module")
def probe(xvfb: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeApp]:
    events = tmp_path_factory.mktemp("probe") / "events.jsonl"
    app = ProbeApp(xvfb.name, events)
    try:
        yield app
    finally:
        app.stop()


def _observe(native: NativeProcess, **params: Any) -> dict[str, Any]:
    return native.result("screenshot", **params)["metadata"]


def _image_point(meta: dict[str, Any], x: int, y: int) -> tuple[int, int]:
    """Display pixel → image pixel for an observation (inverse of the adapter's mapping)."""
    rect, size = meta["source_rect"], meta["image_size"]
    return (
        int((x - rect["x"]) * size["width"] / rect["width"]),
        int((y - rect["y"]) * size["height"] / rect["height"]),
    )


def _centre(rect: list[int]) -> tuple[int, int]:
    x, y, w, h = rect
    return x + w // 2, y + h // 2


def _act(native: NativeProcess, op: str, meta: dict[str, Any], action: dict[str, Any]) -> Any:
    return native.call(
        "action", operation_id=op, observation_id=meta["observation_id"], action=action
    )


def test_click_lands_on_the_probe_button(
    connected: Callable[..., NativeProcess], probe: ProbeApp
) -> None:
    native = connected()
    meta = _observe(native)
    x, y = _image_point(meta, *_centre(probe.ready["button"]))
    since = probe.events.mark()
    response = _act(native, "click-1", meta, {"type": "click", "x": x, "y": y, "button": "left"})
    result = response["result"]
    assert result["status"] == "submitted", response
    assert result["operation_id"] == "click-1" and result["side_effect_possible"] is True
    assert result["generation"] == meta["generation"]
    assert result["after_frame_id"] >= meta["frame_id"]
    probe.events.wait_for(lambda e: e["type"] == "button_command", since=since)
    # The same id and arguments return the cached result without clicking again.
    again = _act(native, "click-1", meta, {"type": "click", "x": x, "y": y, "button": "left"})
    assert again["result"] == result
    conflict = _act(native, "click-1", meta, {"type": "click", "x": x + 1, "y": y})
    assert conflict["error"]["code"] == "OPERATION_CONFLICT"
    assert len(probe.events.of_type("button_command", since=since)) == 1


def test_scaled_observation_maps_back_to_display_pixels(
    connected: Callable[..., NativeProcess], probe: ProbeApp
) -> None:
    native = connected()
    meta = _observe(native, max_edge=960)  # half size: one image pixel is two display pixels
    assert meta["image_size"] == {"width": 960, "height": 540}
    bx, by = _centre(probe.ready["button"])
    since = probe.events.mark()
    action = {"type": "click", "x": bx // 2, "y": by // 2}
    assert _act(native, "scaled-click", meta, action)["result"]["status"] == "submitted"
    press = probe.events.wait_for(lambda e: e["type"] == "button_press", since=since)
    assert abs(press["x"] - bx) <= 1 and abs(press["y"] - by) <= 1


@pytest.mark.parametrize(
    "text",
    ["Hello, probe 123 !?", "Grüße, café — 日本語 ✓ ñ"],
    ids=["ascii", "non-ascii"],
)
def test_typed_text_arrives_exactly(
    connected: Callable[..., NativeProcess], probe: ProbeApp, text: str
) -> None:
    native = connected()
    meta = _observe(native)
    x, y = _image_point(meta, *_centre(probe.ready["entry"]))
    # Focus the entry and clear it.
    assert _act(native, f"focus-{text}", meta, {"type": "click", "x": x, "y": y})["ok"]
    clear = {"type": "hotkey", "keys": ["ctrl", "slash"]}  # Tk: select all
    assert _act(native, f"select-{text}", meta, clear)["result"]["status"] == "submitted"
    assert _act(native, f"del-{text}", meta, {"type": "key_press", "key": "BackSpace"})["ok"]
    since = probe.events.mark()
    typed = _act(native, f"type-{text}", meta, {"type": "type_text", "text": text})
    assert typed["result"]["status"] == "submitted", typed
    probe.events.wait_for(lambda e: e["type"] == "text" and e["text"] == text, since=since)


def test_drag_follows_the_path(connected: Callable[..., NativeProcess], probe: ProbeApp) -> None:
    native = connected()
    meta = _observe(native)
    cx, cy, cw, ch = probe.ready["canvas"]
    corners = [
        (cx + 40, cy + 40),
        (cx + cw - 40, cy + 40),
        (cx + cw - 40, cy + ch - 40),
        (cx + 40, cy + ch - 40),
    ]
    path = [dict(zip(("x", "y"), _image_point(meta, *p), strict=True)) for p in corners]
    since = probe.events.mark()
    response = _act(native, "drag-1", meta, {"type": "drag", "path": path, "duration_ms": 400})
    assert response["result"]["status"] == "submitted", response
    drag = probe.events.wait_for(lambda e: e["type"] == "drag", since=since)
    points = drag["path"]
    assert points[0] == list(corners[0]) and points[-1] == list(corners[-1])
    for corner in corners[1:-1]:  # every corner was passed within a pixel
        assert min(abs(px - corner[0]) + abs(py - corner[1]) for px, py in points) <= 2
    assert len(points) >= 4


def test_stale_and_unknown_observations_are_refused(
    connected: Callable[..., NativeProcess],
) -> None:
    native = connected()
    meta = _observe(native, max_edge=64)
    move = {"type": "move", "x": 1, "y": 1}
    outside = {"type": "move", "x": 64, "y": 0}
    assert _act(native, "edge", meta, outside)["error"]["code"] == "COORDINATE_OUT_OF_RANGE"
    changed = native.result("display", index=0)  # a new generation of the same display
    assert changed["generation"] == meta["generation"] + 1
    stale = _act(native, "stale", meta, move)
    assert stale["error"]["code"] == "OBSERVATION_STALE"
    assert stale["error"]["side_effect_possible"] is False
    unknown = native.call("action", operation_id="u", observation_id="obs_9_999", action=move)
    assert unknown["error"]["code"] in ("OBSERVATION_STALE", "OBSERVATION_NOT_FOUND")
    native.wait_ready()
    fresh = _observe(native, max_edge=64)
    assert _act(native, "stale", fresh, move)["result"]["status"] == "submitted"


def test_cancel_a_long_drag_releases_the_button(
    connected: Callable[..., NativeProcess], probe: ProbeApp
) -> None:
    native = connected()
    meta = _observe(native)
    cx, cy, _, _ = probe.ready["canvas"]
    path = [
        dict(zip(("x", "y"), _image_point(meta, cx + 20 + i * 30, cy + 50), strict=True))
        for i in range(20)
    ]
    since = probe.events.mark()
    rid = native.send(
        {
            "method": "action",
            "operation_id": "long-drag",
            "observation_id": meta["observation_id"],
            "action": {"type": "drag", "path": path, "duration_ms": 2000},
        }
    )
    probe.events.wait_for(lambda e: e["type"] == "button_press", since=since)
    assert native.result("cancel", request_id=rid) == {"cancelled": True}
    result = native.wait(rid)["result"]
    assert result["status"] == "outcome_unknown" and result["code"] == "CANCELLED"
    assert result["side_effect_possible"] is True
    probe.events.wait_for(lambda e: e["type"] == "button_release", since=since, timeout=5)
    retry = native.call(
        "action",
        operation_id="long-drag",
        observation_id=meta["observation_id"],
        action={"type": "drag", "path": path, "duration_ms": 2000},
    )
    assert retry["result"] == result  # never re-run an uncertain effect


def test_invalid_action_payloads(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    meta = _observe(native, max_edge=64)
    bad = [
        {"type": "click", "x": 1, "y": 1, "button": "fourth"},
        {"type": "click", "x": 1, "y": 1, "extra": True},
        {"type": "scroll", "x": 1, "y": 1, "direction": "up", "ticks": 11},
        {"type": "drag", "path": [{"x": 1, "y": 1}]},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 2, "y": 2}], "duration_ms": 99},
        {"type": "hotkey", "keys": ["ctrl", "ctrl"]},
        {"type": "hotkey", "keys": ["a"]},
        {"type": "key_press", "key": "NoSuchKeyName"},
        {"type": "type_text", "text": "é" * 8193},
        {"type": "teleport"},
    ]
    for i, action in enumerate(bad):
        response = _act(native, f"bad-{i}", meta, action)
        assert response["ok"] is False, action
        assert response["error"]["code"] in ("INVALID_ARGUMENT", "UNKNOWN_FIELD"), response


def test_scroll_and_double_click_reach_the_app(
    connected: Callable[..., NativeProcess], probe: ProbeApp
) -> None:
    native = connected()
    meta = _observe(native)
    x, y = _image_point(meta, *_centre(probe.ready["canvas"]))
    since = probe.events.mark()
    scroll = {"type": "scroll", "x": x, "y": y, "direction": "down", "ticks": 2}
    assert _act(native, "scroll", meta, scroll)["result"]["status"] == "submitted"
    double = {"type": "double_click", "x": x, "y": y, "button": "right"}
    assert _act(native, "double", meta, double)["result"]["status"] == "submitted"
    probe.events.wait_for(lambda e: e["type"] == "button_press" and e["button"] == 5, since=since)
    presses = lambda: [  # noqa: E731
        e for e in probe.events.of_type("button_press", since=since) if e["button"] == 3
    ]
    probe.events.wait_for(lambda e: e["type"] == "button_press" and e["button"] == 3, since=since)
    assert len(presses()) == 2 or probe.events.wait_for(lambda e: len(presses()) == 2, since=since)


def test_device_registry_path_is_used(device: tuple[Path, str, str]) -> None:
    registry, device_id, _ = device
    assert device_id in registry.read_text()
