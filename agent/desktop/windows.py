"""Top-level windows of an X display: list them, check they still exist, focus one.

Uses python-xlib directly (no xdotool/wmctrl process per call). With an
EWMH window manager the list is `_NET_CLIENT_LIST` and focusing asks the WM
(`_NET_ACTIVE_WINDOW`); on a bare X server (Xvfb without a WM) the list is the
viewable, non-override-redirect children of the root, and focusing raises the
window and sets the input focus directly.

X ids are recycled once their client disconnects; `read_tag`/`write_tag`
put a text property on a window, which dies with it, so callers can tell a
window from a later one that got the same X id. `pid` comes from
`_NET_WM_PID` or, for toolkits that never set it (Tk), the X-Resource
extension's record of the client's PID.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from Xlib import X, Xatom
from Xlib import error as xerror

from tetherbed.agent.desktop.errors import DisplayUnavailable, WindowGone
from tetherbed.agent.desktop.xdisplay import open_display


@dataclass(frozen=True, slots=True)
class WindowInfo:
    """One top-level window. `bounds` is display-global (x, y, width, height)."""

    xid: int
    title: str
    app: str | None
    pid: int | None
    bounds: tuple[int, int, int, int]
    focused: bool


class WindowInspector:
    """Window queries on one display, over its own X connection (thread-safe)."""

    def __init__(self, display: str) -> None:
        self.display = display
        self._x = open_display(display)
        self._root = self._x.screen().root
        self._lock = threading.Lock()
        atom = self._x.intern_atom
        self._net_client_list = atom("_NET_CLIENT_LIST")
        self._net_active = atom("_NET_ACTIVE_WINDOW")
        self._net_supported = atom("_NET_SUPPORTED")
        self._net_wm_name = atom("_NET_WM_NAME")
        self._net_wm_pid = atom("_NET_WM_PID")
        self._utf8 = atom("UTF8_STRING")
        self._wm_state = atom("WM_STATE")
        # X-Resource knows the PID of every local client, also of toolkits
        # (Tk) that never set _NET_WM_PID.
        self._has_xres = bool(self._x.has_extension("X-Resource"))

    # --- listing -------------------------------------------------------------

    def list_windows(self) -> list[WindowInfo]:
        """Viewable top-level windows, bottom to top in stacking order."""
        with self._lock:
            try:
                while self._x.pending_events():  # MappingNotify etc.: never read otherwise
                    self._x.next_event()
                focus_top = self._focused_toplevel()
                infos = []
                for window in self._toplevels():
                    info = self._describe(window, focus_top)
                    if info is not None:
                        infos.append(info)
                return infos
            except xerror.ConnectionClosedError as exc:
                raise DisplayUnavailable(f"X display {self.display} went away: {exc}") from exc

    def _toplevels(self) -> list[Any]:
        managed = self._root.get_full_property(self._net_client_list, Xatom.WINDOW)
        if managed is not None and len(managed.value):
            return [self._x.create_resource_object("window", xid) for xid in managed.value]
        windows = []
        for child in self._root.query_tree().children:
            try:
                attrs = child.get_attributes()
            except xerror.BadWindow:
                continue
            if attrs.map_state != X.IsViewable or attrs.override_redirect:
                continue
            windows.append(self._client_of(child))
        return windows

    def _client_of(self, frame: Any) -> Any:
        """The client window inside a (possibly reparenting-WM) frame."""
        if frame.get_full_property(self._wm_state, X.AnyPropertyType) is not None:
            return frame
        if frame.get_wm_name() or frame.get_wm_class():
            return frame
        try:
            for child in frame.query_tree().children:
                if child.get_full_property(self._wm_state, X.AnyPropertyType) is not None:
                    return child
        except xerror.BadWindow:
            pass
        return frame

    def _describe(self, window: Any, focus_top: int | None) -> WindowInfo | None:
        try:
            title = self._title(window)
            wm_class = window.get_wm_class()
            if not title and not wm_class:
                return None
            pid = self._pid(window)
            bounds = self._bounds(window)
        except (xerror.BadWindow, xerror.BadDrawable):
            return None  # closed while we looked
        return WindowInfo(
            xid=window.id,
            title=title,
            app=wm_class[1] if wm_class else None,
            pid=pid,
            bounds=bounds,
            focused=focus_top == window.id,
        )

    def _title(self, window: Any) -> str:
        prop = window.get_full_property(self._net_wm_name, self._utf8)
        if prop is not None and prop.value:
            value = prop.value
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        name = window.get_wm_name()
        if isinstance(name, bytes):
            return name.decode("latin-1")
        return name or ""

    def _pid(self, window: Any) -> int | None:
        """_NET_WM_PID, else the owning client's PID as the X server knows it."""
        prop = window.get_full_property(self._net_wm_pid, Xatom.CARDINAL)
        if prop is not None and len(prop.value):
            return int(prop.value[0])
        if not self._has_xres:
            return None
        from Xlib.ext import res

        spec = {"client": window.id, "mask": res.LocalClientPIDMask}
        reply = self._x.res_query_client_ids([spec])
        for client in reply.ids:
            if client.spec.mask == res.LocalClientPIDMask and client.value:
                return int(client.value[0])
        return None

    def _bounds(self, window: Any) -> tuple[int, int, int, int]:
        geometry = window.get_geometry()
        origin = self._root.translate_coords(window, 0, 0)
        return origin.x, origin.y, geometry.width, geometry.height

    def _focused_toplevel(self) -> int | None:
        """The X id of the root child (or managed client) holding the input focus."""
        focus = self._x.get_input_focus().focus
        if not hasattr(focus, "id"):
            return None  # PointerRoot or None
        managed = self._root.get_full_property(self._net_client_list, Xatom.WINDOW)
        candidates = set(managed.value) if managed is not None else set()
        window = focus
        try:
            while True:
                if window.id in candidates:
                    return window.id
                parent = window.query_tree().parent
                if not hasattr(parent, "id") or parent.id == self._root.id:
                    return self._client_of(window).id
                window = parent
        except xerror.BadWindow:
            return None

    # --- single windows ------------------------------------------------------

    def describe(self, xid: int) -> WindowInfo:
        """The window `xid` now; WindowGone if it no longer exists."""
        with self._lock:
            window = self._x.create_resource_object("window", xid)
            info = self._describe(window, self._focused_toplevel())
        if info is None:
            raise WindowGone(f"window {xid:#x} no longer exists")
        return info

    def exists(self, xid: int) -> bool:
        """Whether `xid` still names a listed-kind window."""
        try:
            self.describe(xid)
        except WindowGone:
            return False
        return True

    # --- tags ------------------------------------------------------------------

    def read_tag(self, xid: int, name: str) -> str | None:
        """The text property `name` of window `xid`; None if unset or the window is gone."""
        with self._lock:
            window = self._x.create_resource_object("window", xid)
            try:
                prop = window.get_full_property(self._x.intern_atom(name), self._utf8)
            except (xerror.BadWindow, xerror.BadDrawable):
                return None
        if prop is None or not len(prop.value):
            return None
        value = prop.value
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    def write_tag(self, xid: int, name: str, value: str) -> bool:
        """Set text property `name` on `xid`; False if the window is gone.

        Properties die with their window, so a tag names one window's life
        even after the server recycles its X id.
        """
        errors: list[Exception] = []
        with self._lock:
            window = self._x.create_resource_object("window", xid)
            window.change_property(
                self._x.intern_atom(name), self._utf8, 8, value.encode(), onerror=errors.append
            )
            self._x.sync()
        return not errors

    def focus(self, xid: int) -> None:
        """Raise and focus `xid`; WindowGone if it is no longer there."""
        with self._lock:
            window = self._x.create_resource_object("window", xid)
            errors: list[Exception] = []
            try:
                window.get_attributes()
            except xerror.BadWindow:
                raise WindowGone(f"window {xid:#x} no longer exists") from None
            if self._wm_supports_active_window():
                self._ask_wm_to_activate(window)
            else:
                window.configure(stack_mode=X.Above, onerror=errors.append)
                window.set_input_focus(X.RevertToParent, X.CurrentTime, onerror=errors.append)
            self._x.sync()
            if errors:
                raise WindowGone(f"window {xid:#x} vanished while being focused")

    def _wm_supports_active_window(self) -> bool:
        supported = self._root.get_full_property(self._net_supported, Xatom.ATOM)
        return supported is not None and self._net_active in supported.value

    def _ask_wm_to_activate(self, window: Any) -> None:
        from Xlib.protocol import event

        message = event.ClientMessage(
            window=window,
            client_type=self._net_active,
            data=(32, [2, X.CurrentTime, 0, 0, 0]),  # source 2: a pager/tool
        )
        mask = X.SubstructureRedirectMask | X.SubstructureNotifyMask
        self._root.send_event(message, event_mask=mask)

    def close(self) -> None:
        with self._lock:
            self._x.close()
