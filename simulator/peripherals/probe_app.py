"""A Tk desktop app that reports every input it receives, to prove an action landed.

    python -m tetherbed.simulator.peripherals.probe_app --display :N --events FILE

It shows known content at known places - a big button, a text entry and a
canvas for drags - and appends one JSON object per line to FILE for every
button press/release (display-global coordinates), key press/release, change
of the entry's text, completed drag (its path), wheel notch, focus change and
window geometry change. (Tk reports the horizontal wheel, X buttons 6/7, as
buttons 4/5 with Shift held.) A file (not a socket) because any test, scenario or
person can tail it, it survives the reader starting late, and a line-buffered
append is atomic enough for one writer. `ProbeEvents` reads it back.

Every event has "type" and "t" (seconds, monotonic clock of the app). The
first is "ready", carrying the window and widget rectangles as
[x, y, width, height] in display-global pixels.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

#: Widget rectangles inside the window: (x, y, width, height).
BUTTON_RECT = (20, 20, 300, 120)
ENTRY_RECT = (20, 160, 560, 40)
CANVAS_RECT = (20, 220, 760, 360)
DEFAULT_GEOMETRY = "800x600+100+100"
DEFAULT_TITLE = "Tetherbed Probe"


class ProbeApp:
    """The Tk window; `run()` blocks in Tk's main loop."""

    def __init__(self, events: IO[str], *, title: str, geometry: str) -> None:
        import tkinter as tk

        self._out = events
        self.root = tk.Tk(className="TetherbedProbe")
        self.root.title(title)
        self.root.geometry(geometry)
        self.root.resizable(False, False)
        self._title = title
        self.text = tk.StringVar(self.root)
        self.button = tk.Button(
            self.root, text="PRESS", font=("TkDefaultFont", 28), command=self._on_command
        )
        self.entry = tk.Entry(self.root, textvariable=self.text, font=("TkDefaultFont", 14))
        self.canvas = tk.Canvas(self.root, background="white", highlightthickness=0)
        for widget, (x, y, w, h) in (
            (self.button, BUTTON_RECT),
            (self.entry, ENTRY_RECT),
            (self.canvas, CANVAS_RECT),
        ):
            widget.place(x=x, y=y, width=w, height=h)
        self._drag: list[list[int]] | None = None
        self._drag_button = 0
        self._ready = False
        self._last_geometry: list[int] | None = None
        self.text.trace_add("write", lambda *_: self.emit("text", text=self.text.get()))
        self._bind()

    def _bind(self) -> None:
        root = self.root
        root.bind_all("<ButtonPress>", self._on_press, add="+")
        root.bind_all("<ButtonRelease>", self._on_release, add="+")
        root.bind_all("<KeyPress>", lambda e: self._on_key("key_press", e), add="+")
        root.bind_all("<KeyRelease>", lambda e: self._on_key("key_release", e), add="+")
        self.canvas.bind("<Motion>", self._on_motion, add="+")
        root.bind("<FocusIn>", lambda e: self._on_focus("focus_in", e), add="+")
        root.bind("<FocusOut>", lambda e: self._on_focus("focus_out", e), add="+")
        root.bind("<Configure>", self._on_configure, add="+")
        root.bind("<Map>", self._on_map, add="+")
        root.protocol("WM_DELETE_WINDOW", self.close)

    # --- reporting -----------------------------------------------------------

    def emit(self, kind: str, **fields: Any) -> None:
        record = {"type": kind, "t": round(time.monotonic(), 6), **fields}
        self._out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._out.flush()

    def _rect(self, widget: Any) -> list[int]:
        return [
            widget.winfo_rootx(),
            widget.winfo_rooty(),
            widget.winfo_width(),
            widget.winfo_height(),
        ]

    def geometry(self) -> dict[str, list[int]]:
        """Window and widget rectangles, display-global."""
        return {
            "window": self._rect(self.root),
            "button": self._rect(self.button),
            "entry": self._rect(self.entry),
            "canvas": self._rect(self.canvas),
        }

    def _widget_name(self, widget: Any) -> str:
        for name in ("button", "entry", "canvas"):
            if widget is getattr(self, name):
                return name
        return "window" if widget is self.root else str(widget)

    # --- handlers ------------------------------------------------------------

    def _on_map(self, event: Any) -> None:
        if self._ready or event.widget is not self.root:
            return
        self._ready = True
        self.root.update_idletasks()
        self.emit(
            "ready",
            pid=os.getpid(),
            title=self._title,
            window_id=self.root.wm_frame(),
            **self.geometry(),
        )

    def _on_configure(self, event: Any) -> None:
        if event.widget is not self.root or not self._ready:
            return
        geometry = self._rect(self.root)
        if geometry != self._last_geometry:
            self._last_geometry = geometry
            self.emit("geometry", **self.geometry())

    def _on_press(self, event: Any) -> None:
        self.emit(
            "button_press",
            button=event.num,
            x=event.x_root,
            y=event.y_root,
            widget=self._widget_name(event.widget),
            state=event.state,
        )
        if event.widget is self.canvas and event.num in (1, 2, 3):
            self._drag = [[event.x_root, event.y_root]]
            self._drag_button = event.num

    def _on_motion(self, event: Any) -> None:
        if self._drag is not None:
            point = [event.x_root, event.y_root]
            if point != self._drag[-1]:
                self._drag.append(point)
                x, y = event.x, event.y
                self.canvas.create_oval(x - 2, y - 2, x + 2, y + 2, fill="black")

    def _on_release(self, event: Any) -> None:
        self.emit(
            "button_release",
            button=event.num,
            x=event.x_root,
            y=event.y_root,
            widget=self._widget_name(event.widget),
            state=event.state,
        )
        if self._drag is not None and event.num == self._drag_button:
            end = [event.x_root, event.y_root]
            if end != self._drag[-1]:
                self._drag.append(end)
            self.emit("drag", button=self._drag_button, path=self._drag)
            self._drag = None

    def _on_key(self, kind: str, event: Any) -> None:
        self.emit(
            kind,
            keysym=event.keysym,
            char=event.char,
            keycode=event.keycode,
            state=event.state,
            widget=self._widget_name(event.widget),
        )

    def _on_focus(self, kind: str, event: Any) -> None:
        if event.widget is self.root:
            self.emit(kind)

    def _on_command(self) -> None:
        self.emit("button_command")

    def close(self) -> None:
        self.emit("closed")
        self.root.destroy()

    def run(self) -> None:
        self.root.mainloop()


class ProbeEvents:
    """Reads a probe app's event file; `wait_for` polls it with a deadline."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._offset = 0
        self._partial = ""
        self.events: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        """New complete events since the last poll (all of them are also kept in `events`)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except FileNotFoundError:
            return []
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        new = [json.loads(line) for line in lines if line.strip()]
        self.events.extend(new)
        return new

    def mark(self) -> int:
        """A position in `events`; pass it to `wait_for(since=...)` to ignore older events."""
        self.poll()
        return len(self.events)

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 10.0,
        since: int = 0,
        interval: float = 0.01,
    ) -> dict[str, Any]:
        """The first event at or after index `since` that matches, or TimeoutError."""
        deadline = time.monotonic() + timeout
        checked = since
        while True:
            self.poll()
            for event in self.events[checked:]:
                if predicate(event):
                    return event
            checked = max(checked, len(self.events))
            if time.monotonic() > deadline:
                tail = [e.get("type") for e in self.events[-15:]]
                raise TimeoutError(f"no matching probe event within {timeout} s; last: {tail}")
            time.sleep(interval)

    def of_type(self, kind: str, *, since: int = 0) -> list[dict[str, Any]]:
        self.poll()
        return [e for e in self.events[since:] if e["type"] == kind]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--display", default=os.environ.get("DISPLAY"), help="X display, :N")
    parser.add_argument("--events", required=True, help="file the JSON-lines events go to")
    parser.add_argument("--title", default=DEFAULT_TITLE)
    parser.add_argument("--geometry", default=DEFAULT_GEOMETRY, help="WxH+X+Y")
    args = parser.parse_args(argv)
    if not args.display:
        parser.error("no display: pass --display or set DISPLAY")
    os.environ["DISPLAY"] = args.display
    with open(args.events, "a", encoding="utf-8", buffering=1) as events:
        app = ProbeApp(events, title=args.title, geometry=args.geometry)
        app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
