"""Real mouse and keyboard input on one X display, through the XTEST extension.

Why python-xlib's XTEST and not pyautogui (which sends the same XTEST
requests underneath): pyautogui opens one display, from $DISPLAY, when it is
first imported, for the whole process, so it cannot drive two displays or a
display chosen after import; it keeps no record of held keys or buttons, so it
cannot release them on cancel; and `pyautogui.write` types only characters of
the current layout. Here each driver owns its own X connection, records what
it holds, and types any Unicode text by binding spare keycodes (see
keyboard_map.py). Measured on Xvfb + Tk (10-25 runs each): `xdotool type`
got "héllo wörld ✓ 日本" right 0 times in 5 (it rebinds one scratch keycode
per character and the client reads stale symbols); this driver got it and an
82-character text with 68 distinct non-ASCII characters right every time,
also with two CPU hogs running.

Thread safety: every public call takes one lock, so calls from worker threads
never interleave inside a gesture. `hold_key` sleeps *without* the lock so a
click can happen while a modifier is held. `release_all()` cuts short a
running drag, typing or hold within ~20 ms (they raise InputCancelled).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from Xlib import X
from Xlib.ext import xtest

from tetherbed.agent.desktop.errors import DependencyMissing, DisplayUnavailable, InputCancelled
from tetherbed.agent.desktop.keyboard_map import KeyboardMap
from tetherbed.agent.desktop.keys import (
    keysym_for_char,
    keysym_for_name,
    modifier_keysyms,
    parse_combo,
    parse_sequence,
)
from tetherbed.agent.desktop.xdisplay import open_display

BUTTONS: dict[str, int] = {"left": 1, "middle": 2, "right": 3}
SCROLL_BUTTONS: dict[str, int] = {"up": 4, "down": 5, "left": 6, "right": 7}
#: Longest sleep between checks for cancellation.
_SLICE_S = 0.02
#: Pixels between generated pointer positions along a drag segment.
_DRAG_STEP_PX = 12
#: Core-protocol button masks (query_pointer().mask) for buttons 1-5.
_BUTTON_MASKS = {
    1: X.Button1Mask,
    2: X.Button2Mask,
    3: X.Button3Mask,
    4: X.Button4Mask,
    5: X.Button5Mask,
}


class InputDriver:
    """Mouse and keyboard on `display`; coordinates are display-global pixels."""

    def __init__(self, display: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.display = display
        self._sleep = sleep
        self._x = open_display(display)
        if not self._x.has_extension("XTEST"):
            self._x.close()
            raise DependencyMissing(f"X display {display} lacks the XTEST extension")
        self._root = self._x.screen().root
        self._lock = threading.RLock()
        self._epoch = 0
        self._epoch_lock = threading.Lock()
        self._keys_down: dict[int, int] = {}  # keycode -> how many holders
        self._buttons_down: set[int] = set()
        self._keymap = KeyboardMap(self._x)
        self._closed = False

    # --- low level -------------------------------------------------------

    def _fake(self, event: int, detail: int = 0, *, x: int = 0, y: int = 0) -> None:
        try:
            xtest.fake_input(self._x, event, detail, x=x, y=y)
        except Exception as exc:  # a dead connection raises ConnectionClosedError etc.
            raise DisplayUnavailable(f"X display {self.display} went away: {exc}") from exc

    def _flush(self) -> None:
        try:
            self._x.sync()
            # Every client gets MappingNotify when a keycode is bound; python-xlib
            # queues unread events forever, so drop them.
            while self._x.pending_events():
                self._x.next_event()
        except Exception as exc:
            raise DisplayUnavailable(f"X display {self.display} went away: {exc}") from exc

    def _check(self, epoch: int) -> None:
        if self._epoch != epoch:
            raise InputCancelled("input released by release_all()")

    def _pause(self, seconds: float, epoch: int) -> None:
        deadline = time.monotonic() + seconds
        while True:
            self._check(epoch)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._sleep(min(left, _SLICE_S))

    def _move(self, x: int, y: int) -> None:
        self._fake(X.MotionNotify, x=x, y=y)

    def _key_down(self, keycode: int) -> None:
        self._keys_down[keycode] = self._keys_down.get(keycode, 0) + 1
        if self._keys_down[keycode] == 1:
            self._fake(X.KeyPress, keycode)
        self._keymap.touch(keycode)

    def _key_up(self, keycode: int) -> None:
        held = self._keys_down.get(keycode, 0)
        if held <= 0:
            return
        if held == 1:
            del self._keys_down[keycode]
            self._fake(X.KeyRelease, keycode)
        else:
            self._keys_down[keycode] = held - 1
        self._keymap.touch(keycode)

    def _press_keysyms(self, keysyms: Sequence[int]) -> list[int]:
        """Press keys in order (adding shift where a symbol needs it); returns keycodes."""
        pressed: list[int] = []
        shift = self._keymap.stroke(keysym_for_name("Shift_L")).keycode
        for keysym in keysyms:
            stroke = self._keymap.stroke(keysym)
            if stroke.shift and shift not in pressed:
                self._key_down(shift)
                pressed.append(shift)
            self._key_down(stroke.keycode)
            pressed.append(stroke.keycode)
        return pressed

    def _release_keycodes(self, keycodes: Iterable[int]) -> None:
        for keycode in reversed(list(keycodes)):
            self._key_up(keycode)

    def _button(self, button: str | int) -> int:
        if isinstance(button, int):
            return button
        try:
            return BUTTONS[button]
        except KeyError:
            raise ValueError(
                f"unknown mouse button {button!r}; use left, middle or right"
            ) from None

    # --- mouse -------------------------------------------------------------

    def move(self, x: int, y: int) -> None:
        with self._lock:
            self._move(x, y)
            self._flush()

    def click(
        self,
        x: int | None = None,
        y: int | None = None,
        *,
        button: str = "left",
        count: int = 1,
        modifiers: Sequence[str] = (),
    ) -> None:
        """`count` clicks (2 = double, 3 = triple) at (x, y), or where the pointer is."""
        number = self._button(button)
        with self._lock:
            held = self._press_keysyms(modifier_keysyms(tuple(modifiers)))
            try:
                if x is not None and y is not None:
                    self._move(x, y)
                for _ in range(count):
                    self._fake(X.ButtonPress, number)
                    self._fake(X.ButtonRelease, number)
            finally:
                self._release_keycodes(held)
                self._flush()

    def button_down(self, button: str = "left", x: int | None = None, y: int | None = None) -> None:
        number = self._button(button)
        with self._lock:
            if x is not None and y is not None:
                self._move(x, y)
            if number not in self._buttons_down:
                self._buttons_down.add(number)
                self._fake(X.ButtonPress, number)
            self._flush()

    def button_up(self, button: str = "left", x: int | None = None, y: int | None = None) -> None:
        number = self._button(button)
        with self._lock:
            if x is not None and y is not None:
                self._move(x, y)
            self._buttons_down.discard(number)
            self._fake(X.ButtonRelease, number)
            self._flush()

    def scroll(
        self,
        x: int | None,
        y: int | None,
        direction: str,
        ticks: int = 1,
        *,
        modifiers: Sequence[str] = (),
    ) -> None:
        """Wheel `ticks` notches (buttons 4-7) at (x, y) or where the pointer is."""
        try:
            number = SCROLL_BUTTONS[direction]
        except KeyError:
            raise ValueError(f"unknown scroll direction {direction!r}") from None
        with self._lock:
            held = self._press_keysyms(modifier_keysyms(tuple(modifiers)))
            try:
                if x is not None and y is not None:
                    self._move(x, y)
                for _ in range(ticks):
                    self._fake(X.ButtonPress, number)
                    self._fake(X.ButtonRelease, number)
            finally:
                self._release_keycodes(held)
                self._flush()

    def drag(
        self, path: Sequence[tuple[int, int]], duration_s: float = 0.3, button: str = "left"
    ) -> None:
        """Press at path[0], move through every point over `duration_s`, release at the end.

        Long segments are split every ~12 px so that toolkits which sample
        motion see the whole path, not just its corners.
        """
        if len(path) < 2:
            raise ValueError("a drag path needs at least two points")
        number = self._button(button)
        points = _densify(path, _DRAG_STEP_PX)
        delay = max(duration_s, 0.0) / max(len(points) - 1, 1)
        with self._lock:
            epoch = self._epoch
            self._move(*points[0])
            self._buttons_down.add(number)
            self._fake(X.ButtonPress, number)
            self._flush()
            try:
                for point in points[1:]:
                    self._pause(delay, epoch)
                    self._move(*point)
                    self._flush()
            finally:
                if number in self._buttons_down:
                    self._buttons_down.discard(number)
                    self._fake(X.ButtonRelease, number)
                self._flush()

    def cursor(self) -> tuple[int, int]:
        with self._lock:
            try:
                pointer = self._root.query_pointer()
            except Exception as exc:
                raise DisplayUnavailable(f"X display {self.display} went away: {exc}") from exc
            return pointer.root_x, pointer.root_y

    # --- keyboard ----------------------------------------------------------

    def key(self, combo: str) -> None:
        """Press and release a combo ("ctrl+s", "Return"); spaces separate combos."""
        sequence = parse_sequence(combo)
        with self._lock:
            self._keymap.refresh()
            for keysyms in sequence:
                pressed = self._press_keysyms(keysyms)
                self._release_keycodes(pressed)
            self._flush()

    def hotkey(self, keys: Sequence[str]) -> None:
        """Press `keys` in order, release them in reverse: ["ctrl", "shift", "t"]."""
        keysyms = [keysym_for_name(k) for k in keys]
        with self._lock:
            self._keymap.refresh()
            pressed = self._press_keysyms(keysyms)
            self._release_keycodes(pressed)
            self._flush()

    def hold_key(self, key: str, seconds: float) -> None:
        """Hold a key or combo for `seconds`; other input may run meanwhile."""
        keysyms = parse_combo(key)
        with self._lock:
            epoch = self._epoch
            self._keymap.refresh()
            pressed = self._press_keysyms(keysyms)
            self._flush()
        try:
            self._pause(seconds, epoch)
        finally:
            with self._lock:
                if self._epoch == epoch:  # release_all() already let go otherwise
                    self._release_keycodes(pressed)
                    self._flush()

    def type_text(self, text: str) -> None:
        """Type `text` exactly, any Unicode; newline is Return, tab is Tab."""
        keysyms = [keysym_for_char(c) for c in text.replace("\r\n", "\n")]
        with self._lock:
            epoch = self._epoch
            self._keymap.refresh()
            done = 0
            while done < len(keysyms):
                batch = self._keymap.prepare(keysyms[done:])
                for keysym in keysyms[done : done + batch]:
                    self._check(epoch)
                    pressed = self._press_keysyms([keysym])
                    self._release_keycodes(pressed)
                self._flush()
                done += batch

    # --- cleanup -------------------------------------------------------------

    def release_all(self) -> None:
        """Let go of every button and key: ours, and any the server still reports down."""
        with self._epoch_lock:
            self._epoch += 1
        with self._lock:
            for number in sorted(self._buttons_down):
                self._fake(X.ButtonRelease, number)
            self._buttons_down.clear()
            for keycode in list(self._keys_down):
                self._fake(X.KeyRelease, keycode)
            self._keys_down.clear()
            self._flush()
            self._release_reported()

    def _release_reported(self) -> None:
        """Release what the server still sees held (e.g. by a cancelled xdotool)."""
        pointer = self._root.query_pointer()
        for number, mask in _BUTTON_MASKS.items():
            if pointer.mask & mask:
                self._fake(X.ButtonRelease, number)
        keymap = self._x.query_keymap()
        for index, byte in enumerate(keymap):
            for bit in range(8):
                if byte & (1 << bit):
                    self._fake(X.KeyRelease, index * 8 + bit)
        self._flush()

    def held(self) -> tuple[frozenset[int], frozenset[int]]:
        """(buttons, keycodes) this driver currently holds down."""
        with self._lock:
            return frozenset(self._buttons_down), frozenset(self._keys_down)

    def close(self) -> None:
        """Release everything, unbind borrowed keycodes, close the connection."""
        if self._closed:
            return
        try:
            self.release_all()
            with self._lock:
                self._keymap.restore()
        except Exception:
            pass  # the display may already be gone; closing must not fail
        finally:
            self._closed = True
            self._x.close()

    def __enter__(self) -> InputDriver:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _densify(path: Sequence[tuple[int, int]], step: int) -> list[tuple[int, int]]:
    """`path` with points inserted so that no two neighbours are over `step` px apart."""
    points = [(int(path[0][0]), int(path[0][1]))]
    for (x0, y0), (x1, y1) in itertools.pairwise(path):
        distance = max(abs(x1 - x0), abs(y1 - y0))
        steps = max(1, -(-distance // step))
        for i in range(1, steps + 1):
            points.append((round(x0 + (x1 - x0) * i / steps), round(y0 + (y1 - y0) * i / steps)))
    return points
