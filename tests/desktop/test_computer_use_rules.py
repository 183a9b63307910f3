"""The sans-I/O rules of computer use: window ids, clipboard policy, bounds. No display."""

from __future__ import annotations

import uuid

import pytest

from tetherbed.agent.computer_use.bounds import check_point, check_region, clip_to_screen
from tetherbed.agent.computer_use.clipboard import ClipboardPolicy
from tetherbed.agent.computer_use.windows import WindowIds
from tetherbed.agent.desktop.capture import Monitor
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.errors import ProtocolError

#: Two side-by-side monitors of different heights: (1920+1280) x 1080, with a hole.
MONITORS = [Monitor(0, 0, 0, 1920, 1080, True), Monitor(1, 1920, 0, 1280, 720, False)]


def test_window_ids_follow_the_tag() -> None:
    ids = WindowIds()
    first = ids.mint(0x400001)
    assert first.startswith("win_") and uuid.UUID(first.removeprefix("win_"))
    assert ids.known(0x400001, first) == first
    assert ids.known(0x400001, None) is None  # untagged: a new window with a recycled id
    assert ids.known(0x400002, first) is None  # the tag belongs to another X id
    second = ids.mint(0x400001)
    assert second != first
    assert ids.resolve(first) is None and ids.resolve(second) == 0x400001
    ids.forget(second)
    assert ids.resolve(second) is None and len(ids) == 0


def test_clipboard_policy() -> None:
    clock = ManualClock()
    closed = ClipboardPolicy(read_opt_in=False, clock=clock)
    closed.record_write("x")
    with pytest.raises(ProtocolError, match="disabled"):
        closed.readable(current="x", still_ours=True)
    assert closed.permission() == "denied"

    open_ = ClipboardPolicy(read_opt_in=True, clock=clock)
    with pytest.raises(ProtocolError, match="not written"):
        open_.readable(current=None, still_ours=False)
    open_.record_write("x")
    assert open_.readable(current="x", still_ours=True) == "x"
    with pytest.raises(ProtocolError, match="changed"):
        open_.readable(current="x", still_ours=False)
    with pytest.raises(ProtocolError, match="changed"):
        open_.readable(current="y", still_ours=True)
    clock.advance(30.5)
    with pytest.raises(ProtocolError) as caught:
        open_.readable(current="x", still_ours=True)
    assert caught.value.code == "CLIPBOARD_CONCEALED"


def test_points_must_fall_on_a_monitor() -> None:
    assert check_point(MONITORS, [3199, 719]) == (3199, 719)
    with pytest.raises(ProtocolError) as caught:
        check_point(MONITORS, [2000, 900])  # the hole under the second monitor
    assert caught.value.code == "INPUT_OUT_OF_BOUNDS"
    assert caught.value.details == {
        "coordinate": [2000, 900],
        "displays": [
            {"index": 0, "primary": True, "rect": [0, 0, 1920, 1080]},
            {"index": 1, "primary": False, "rect": [1920, 0, 3200, 720]},
        ],
    }


def test_regions_and_clipping() -> None:
    assert check_region(MONITORS, [1900, 10, 2000, 60]) == (1900, 10, 100, 50)
    with pytest.raises(ProtocolError, match="outside"):
        check_region(MONITORS, [0, 0, 3201, 10])
    with pytest.raises(ProtocolError, match="empty"):
        check_region(MONITORS, [5, 5, 5, 9])
    assert clip_to_screen(MONITORS, (3100, -50, 200, 100)) == (3100, 0, 100, 50)
    assert clip_to_screen(MONITORS, (4000, 0, 10, 10)) is None
