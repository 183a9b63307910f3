"""The X CLIPBOARD selection, owned and served by a thread of our own.

On X11 the clipboard is not a buffer: it is a promise by the owning client to
answer SelectionRequest events, so whoever "writes" it must stay alive and
serve requests. `ClipboardOwner` does that on its own X connection and thread
(python-xlib connections are not safe to share between threads), and speaks
INCR for texts too big for one X request. It can also read the current
owner's text once, which `type` with paste + preserve_clipboard needs in order
to put the user's clipboard back; it never reads on anyone else's behalf.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from Xlib import X, Xatom
from Xlib.protocol import event as xevent

from tetherbed.agent.desktop.errors import ClipboardError, DisplayUnavailable
from tetherbed.agent.desktop.xdisplay import open_display

T = TypeVar("T")

#: Bytes per property write: well under the 256 KiB core request limit.
CHUNK_BYTES = 128 * 1024
#: Seconds a command to the owner thread may take.
CALL_TIMEOUT_S = 5.0


@dataclass
class _Incr:
    """An INCR transfer in progress to one requestor."""

    requestor: Any
    prop: int
    target: int
    data: bytes
    offset: int = 0


@dataclass
class _Read:
    done: threading.Event = field(default_factory=threading.Event)
    value: str | None = None
    failed: bool = False


class ClipboardOwner:
    """Sets (and serves) the CLIPBOARD selection on one display."""

    def __init__(self, display: str) -> None:
        self.display = display
        self._x = open_display(display)
        x = self._x
        self._window = x.screen().root.create_window(
            0, 0, 1, 1, 0, X.CopyFromParent, event_mask=X.PropertyChangeMask
        )
        self._clipboard = x.intern_atom("CLIPBOARD")
        self._targets = x.intern_atom("TARGETS")
        self._utf8 = x.intern_atom("UTF8_STRING")
        self._text = x.intern_atom("TEXT")
        self._mime = x.intern_atom("text/plain;charset=utf-8")
        self._incr = x.intern_atom("INCR")
        self._landing = x.intern_atom("TETHERBED_CLIPBOARD")
        self._text_targets = {self._utf8, Xatom.STRING, self._text, self._mime}
        self._data: str | None = None
        self._owner = False
        self._served = 0
        self._served_cond = threading.Condition()
        self._transfers: dict[tuple[int, int], _Incr] = {}
        self._read: _Read | None = None
        self._commands: queue.Queue[tuple[Callable[[], Any], list[Any], threading.Event]] = (
            queue.Queue()
        )
        self._wake_r, self._wake_w = os.pipe()
        self._running = True
        self._thread = threading.Thread(target=self._loop, daemon=True, name="clipboard-owner")
        self._thread.start()

    # --- public API (any thread) ---------------------------------------------

    def write(self, text: str) -> None:
        """Own CLIPBOARD with `text`; raises ClipboardError if the server refuses."""
        if not self._call(lambda: self._take(text)):
            raise ClipboardError("another client kept the clipboard")

    def owns(self) -> bool:
        """Whether our text is still the clipboard (nobody took it since)."""
        return bool(self._call(self._still_owner))

    @property
    def text(self) -> str | None:
        """The text we last wrote (whether or not we still own the clipboard)."""
        return self._data

    def served_count(self) -> int:
        with self._served_cond:
            return self._served

    def wait_served(self, after: int, timeout: float) -> bool:
        """Wait until some client has fetched our text more than `after` times."""
        with self._served_cond:
            return self._served_cond.wait_for(lambda: self._served > after, timeout)

    def read_current(self, timeout: float = 1.0) -> str | None:
        """The current owner's text (ours or another client's); None when empty.

        Raises ClipboardError when the owner offers no text, answers too late,
        or needs INCR (over 128 KiB): reading is only for putting it back.
        """
        pending = _Read()
        self._call(lambda: self._request(pending))
        if not pending.done.wait(timeout):
            raise ClipboardError("the clipboard owner did not answer")
        if pending.failed:
            raise ClipboardError("the clipboard holds no text this agent can read back")
        return pending.value

    def disown(self) -> None:
        """Give up the clipboard (it becomes empty)."""
        self._call(self._release)

    def close(self) -> None:
        if not self._running:
            return
        with contextlib.suppress(Exception):
            self._call(self._release)
        self._running = False
        self._wake()
        self._thread.join(2.0)
        os.close(self._wake_r)
        os.close(self._wake_w)
        self._x.close()

    # --- plumbing --------------------------------------------------------------

    def _call(self, fn: Callable[[], T]) -> T:
        if not self._running or not self._thread.is_alive():
            raise DisplayUnavailable(f"clipboard owner for {self.display} is not running")
        box: list[Any] = []
        done = threading.Event()
        self._commands.put((fn, box, done))
        self._wake()
        if not done.wait(CALL_TIMEOUT_S):
            raise ClipboardError("the clipboard thread did not answer")
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _loop(self) -> None:
        fd = self._x.fileno()
        try:
            while self._running:
                self._run_commands()
                while self._x.pending_events():
                    self._handle(self._x.next_event())
                self._x.flush()
                ready, _, _ = select.select([fd, self._wake_r], [], [], 0.5)
                if self._wake_r in ready:
                    os.read(self._wake_r, 4096)
        except Exception:  # the display went away: fail every later call
            self._running = False
            self._run_commands()

    def _run_commands(self) -> None:
        while True:
            try:
                fn, box, done = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                box.append(fn() if self._running else DisplayUnavailable("display gone"))
            except Exception as exc:
                box.append(exc)
            done.set()

    # --- commands (owner thread only) --------------------------------------------

    def _take(self, text: str) -> bool:
        self._data = text
        self._window.set_selection_owner(self._clipboard, X.CurrentTime)
        self._owner = self._still_owner()
        return self._owner

    def _still_owner(self) -> bool:
        owner = self._x.get_selection_owner(self._clipboard)
        return getattr(owner, "id", owner) == self._window.id

    def _release(self) -> None:
        if self._still_owner():
            self._x.screen().root.set_selection_owner(self._clipboard, X.CurrentTime)
            self._x.get_selection_owner(self._clipboard)  # a round trip: applied
        self._owner = False

    def _request(self, pending: _Read) -> None:
        if self._still_owner():
            pending.value = self._data
            pending.done.set()
            return
        owner = self._x.get_selection_owner(self._clipboard)
        if getattr(owner, "id", owner) in (0, X.NONE):
            pending.done.set()  # empty clipboard: value None
            return
        self._read = pending
        self._window.convert_selection(self._clipboard, self._utf8, self._landing, X.CurrentTime)

    # --- events (owner thread only) ------------------------------------------------

    def _handle(self, ev: Any) -> None:
        if ev.type == X.SelectionRequest:
            self._answer(ev)
        elif ev.type == X.SelectionClear:
            self._owner = False
        elif ev.type == X.SelectionNotify:
            self._received(ev)
        elif ev.type == X.PropertyNotify and ev.state == X.PropertyDelete:
            self._continue_incr(ev)

    def _answer(self, ev: Any) -> None:
        prop = ev.property if ev.property != X.NONE else ev.target
        ok = self._data is not None and ev.selection == self._clipboard
        if ok and ev.target == self._targets:
            targets = [self._targets, *sorted(self._text_targets)]
            ev.requestor.change_property(prop, Xatom.ATOM, 32, targets)
        elif ok and ev.target in self._text_targets:
            encoding = "latin-1" if ev.target == Xatom.STRING else "utf-8"
            data = self._data.encode(encoding, "replace")  # type: ignore[union-attr]
            kind = Xatom.STRING if ev.target == Xatom.STRING else self._utf8
            if len(data) > CHUNK_BYTES:
                self._start_incr(ev.requestor, prop, kind, data)
            else:
                ev.requestor.change_property(prop, kind, 8, data)
            with self._served_cond:
                self._served += 1
                self._served_cond.notify_all()
        else:
            ok = False
        notify = xevent.SelectionNotify(
            time=ev.time,
            requestor=ev.requestor,
            selection=ev.selection,
            target=ev.target,
            property=prop if ok else X.NONE,
        )
        ev.requestor.send_event(notify)

    def _start_incr(self, requestor: Any, prop: int, kind: int, data: bytes) -> None:
        requestor.change_attributes(event_mask=X.PropertyChangeMask)
        requestor.change_property(prop, self._incr, 32, [len(data)])
        self._transfers[(requestor.id, prop)] = _Incr(requestor, prop, kind, data)

    def _continue_incr(self, ev: Any) -> None:
        transfer = self._transfers.get((ev.window.id, ev.atom))
        if transfer is None:
            return
        chunk = transfer.data[transfer.offset : transfer.offset + CHUNK_BYTES]
        transfer.offset += len(chunk)
        transfer.requestor.change_property(transfer.prop, transfer.target, 8, chunk)
        if not chunk:  # the zero-length write ends the transfer
            del self._transfers[(ev.window.id, ev.atom)]

    def _received(self, ev: Any) -> None:
        pending, self._read = self._read, None
        if pending is None:
            return
        pending.failed = True
        if ev.property != X.NONE:
            prop = self._window.get_full_property(self._landing, X.AnyPropertyType)
            self._window.delete_property(self._landing)
            if prop is not None and prop.property_type != self._incr:
                value = prop.value
                pending.value = (
                    value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                )
                pending.failed = False
        pending.done.set()
