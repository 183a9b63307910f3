"""The local-executor computer-use front door: SCREENSHOT_REQUEST, INPUT_ACTION and the rest.

`ComputerUse.run(kind, payload)` answers one request with `(type, payload)` or
raises ProtocolError carrying the spec's code. Blocking work (X requests,
encoding) runs in a small pool of worker threads; `offload=False` runs it
inline for the deterministic simulator. `probe(display)` says whether a
display works and what to advertise in HELLO; `computer_use` is advertised
only when it returns an info.

Wiring (agent runtime):

    info = probe(os.environ.get("DISPLAY"))
    if info:  # HELLO: capabilities += ["computer_use"],
        # screen_resolution=info.screen_resolution,
        # computer_use_features=info.features
        cu = ComputerUse(info.display, clock=clock, limits_provider=lambda: ops.limits,
                         features=info.features)
    ... if kind in ComputerUse.KINDS: return await cu.run(kind, payload)
    ... on disconnect: await cu.release_all(); on shutdown: await cu.close()
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tetherbed.agent.computer_use.bounds import monitor_at
from tetherbed.agent.computer_use.clipboard import ClipboardPolicy
from tetherbed.agent.computer_use.errors import protocol_error
from tetherbed.agent.computer_use.input import feature_of, perform, wait_seconds
from tetherbed.agent.computer_use.screenshot import take_screenshot
from tetherbed.agent.computer_use.windows import WindowIds
from tetherbed.agent.config import Limits
from tetherbed.agent.desktop.apps import AppCatalog, AppEntry, UnknownApp, launch
from tetherbed.agent.desktop.capture import Monitor
from tetherbed.agent.desktop.errors import DesktopError, DisplayAccessDenied, WindowGone
from tetherbed.agent.desktop.session import DesktopSession
from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    Ack,
    AppDescription,
    AppLaunch,
    AppListResponse,
    ClipboardReadResponse,
    ClipboardWrite,
    CursorPositionResponse,
    DisplayDescription,
    DisplayInfoResponse,
    InputAction,
    MessageType,
    Payload,
    PermissionsCheckResponse,
    ScreenshotRequest,
    WindowDescription,
    WindowFocus,
    WindowListResponse,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Reply = tuple[MessageType, Payload]

#: Every feature this implementation has, in `computer_use_features` spelling.
SCREENSHOT_FEATURES = ["screenshot", "screenshot.region", "screenshot.window"]
CURSOR_OVERLAY_FEATURE = "screenshot.cursor"
INPUT_FEATURES = [
    "input.click",
    "input.move",
    "input.button",
    "input.drag",
    "input.type",
    "input.paste",
    "input.key",
    "input.hold_key",
    "input.scroll",
    "input.wait",
    "cursor.position",
]
OTHER_FEATURES = [
    "display.info",
    "window.list",
    "window.focus",
    "app.list",
    "app.launch",
    "clipboard.read",
    "clipboard.write",
    "permissions.check",
]
ALL_FEATURES = [*SCREENSHOT_FEATURES, CURSOR_OVERLAY_FEATURE, *INPUT_FEATURES, *OTHER_FEATURES]

#: Request type -> the feature it needs (INPUT_ACTION: per action, see computer_use_input).
REQUEST_FEATURES: dict[MessageType, str] = {
    MessageType.SCREENSHOT_REQUEST: "screenshot",
    MessageType.CURSOR_POSITION_REQUEST: "cursor.position",
    MessageType.DISPLAY_INFO_REQUEST: "display.info",
    MessageType.WINDOW_LIST_REQUEST: "window.list",
    MessageType.WINDOW_FOCUS: "window.focus",
    MessageType.APP_LIST_REQUEST: "app.list",
    MessageType.APP_LAUNCH: "app.launch",
    MessageType.CLIPBOARD_READ: "clipboard.read",
    MessageType.CLIPBOARD_WRITE: "clipboard.write",
    MessageType.PERMISSIONS_CHECK_REQUEST: "permissions.check",
}


@dataclass(frozen=True, slots=True)
class ComputerUseInfo:
    """What a working display lets the agent advertise in HELLO."""

    display: str
    screen_resolution: list[int]
    features: list[str] = field(default_factory=list)
    monitors: int = 1


def probe(display: str | None = None) -> ComputerUseInfo | None:
    """Connect to `display` (default $DISPLAY) and grab one pixel; None if that fails.

    Blocking (tens of milliseconds): call it once at start-up.
    """
    name = display or os.environ.get("DISPLAY")
    if not name:
        return None
    try:
        from tetherbed.agent.desktop.capture import ScreenCapture
        from tetherbed.agent.desktop.xdisplay import open_display

        connection = open_display(name)
        try:
            has_xtest = bool(connection.has_extension("XTEST"))
            has_xfixes = bool(connection.has_extension("XFIXES"))
        finally:
            connection.close()
        with ScreenCapture(name) as capture:
            monitors = capture.monitors()
            capture.grab(region=(monitors[0].left, monitors[0].top, 1, 1))
    except (DesktopError, ImportError) as exc:
        log.info("computer use unavailable on %s: %s", name, exc)
        return None
    features = list(SCREENSHOT_FEATURES)
    if has_xfixes:
        features.append(CURSOR_OVERLAY_FEATURE)
    if has_xtest:
        features += INPUT_FEATURES
    features += OTHER_FEATURES
    primary = monitors[0]
    return ComputerUseInfo(
        display=name,
        screen_resolution=[primary.width, primary.height],
        features=features,
        monitors=len(monitors),
    )


class ComputerUse:
    """Computer-use requests against one X display."""

    #: The request types `run` accepts.
    KINDS = frozenset({MessageType.INPUT_ACTION, *REQUEST_FEATURES})

    def __init__(
        self,
        display: str,
        *,
        clock: Clock,
        limits_provider: Callable[[], Limits] = Limits,
        features: Iterable[str] | None = None,
        clipboard_read_opt_in: bool = False,
        apps: Sequence[AppEntry] = (),
        include_desktop_files: bool = True,
        offload: bool = True,
        max_workers: int = 4,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.display = display
        self.features = frozenset(ALL_FEATURES if features is None else features)
        self.session = DesktopSession(display, clock=clock)
        self.clipboard = ClipboardPolicy(read_opt_in=clipboard_read_opt_in, clock=clock)
        self.apps = AppCatalog(apps, include_desktop_files=include_desktop_files)
        self._limits = limits_provider
        self._offload = offload
        self._sleep = sleep
        self._ids = WindowIds()
        self._ids_lock = threading.Lock()
        #: Property each listed window carries with its minted id; one name per
        #: instance, so two agents on one display never overwrite each other.
        self._tag = f"_TETHERBED_WINDOW_ID_{uuid.uuid4().hex[:12]}"
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="computer-use")

    # --- entry points ----------------------------------------------------------

    async def run(self, kind: MessageType, payload: Payload) -> Reply:
        """Answer one computer-use request; raises ProtocolError with the spec's code."""
        if kind is MessageType.INPUT_ACTION:
            assert isinstance(payload, InputAction)
            return await self._input(payload)
        feature = REQUEST_FEATURES.get(kind)
        if feature is None:
            raise ProtocolError(ErrorCode.FEATURE_NOT_SUPPORTED, f"{kind} is not computer use")
        self._require(feature)
        if kind is MessageType.SCREENSHOT_REQUEST:
            assert isinstance(payload, ScreenshotRequest)
            self._require_screenshot_parts(payload)
            limits = self._limits()
            response = await self._call(
                take_screenshot, payload, self.session, limits, self._window_bounds
            )
            return MessageType.SCREENSHOT_RESPONSE, response
        if kind is MessageType.CURSOR_POSITION_REQUEST:
            return MessageType.CURSOR_POSITION_RESPONSE, await self._call(self._cursor)
        if kind is MessageType.DISPLAY_INFO_REQUEST:
            return MessageType.DISPLAY_INFO_RESPONSE, await self._call(self._display_info)
        if kind is MessageType.WINDOW_LIST_REQUEST:
            return MessageType.WINDOW_LIST_RESPONSE, await self._call(self._list_windows)
        if kind is MessageType.WINDOW_FOCUS:
            assert isinstance(payload, WindowFocus)
            return MessageType.ACK, await self._call(self._focus, payload.window_id)
        if kind is MessageType.APP_LIST_REQUEST:
            return MessageType.APP_LIST_RESPONSE, await self._call(self._list_apps)
        if kind is MessageType.APP_LAUNCH:
            assert isinstance(payload, AppLaunch)
            return MessageType.ACK, await self._call(self._launch, payload)
        if kind is MessageType.CLIPBOARD_READ:
            return MessageType.CLIPBOARD_READ_RESPONSE, await self._call(self._clipboard_read)
        if kind is MessageType.CLIPBOARD_WRITE:
            assert isinstance(payload, ClipboardWrite)
            return MessageType.ACK, await self._call(self._clipboard_write, payload.text)
        assert kind is MessageType.PERMISSIONS_CHECK_REQUEST
        return MessageType.PERMISSIONS_CHECK_RESPONSE, await self._call(self._permissions)

    async def release_all(self) -> None:
        """Release every held button and key (on cancel, disconnect or shutdown)."""
        await self._call(self.session.release_all, pool=False)

    async def close(self) -> None:
        """Release input, close every X connection and the worker threads."""
        try:
            await self._call(self.session.close, pool=False)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    # --- plumbing ----------------------------------------------------------------

    def _require(self, feature: str) -> None:
        if feature not in self.features:
            raise ProtocolError(
                ErrorCode.FEATURE_NOT_SUPPORTED,
                f"{feature} is not in this agent's computer_use_features",
                details={"feature": feature},
            )

    def _require_screenshot_parts(self, request: ScreenshotRequest) -> None:
        if request.region is not None:
            self._require("screenshot.region")
        if request.window_id is not None:
            self._require("screenshot.window")

    async def _call(self, fn: Callable[..., T], *args: Any, pool: bool = True) -> T:
        """Run blocking `fn` in a worker thread (or inline), mapping failures to codes."""
        try:
            if not self._offload:
                return fn(*args)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool if pool else None, fn, *args)
        except ProtocolError:
            raise
        except Exception as exc:
            error = protocol_error(exc)
            if error.code == ErrorCode.INTERNAL_ERROR:
                log.exception("computer use failed")
            raise error from exc

    async def _input(self, action: InputAction) -> Reply:
        self._require(feature_of(action))
        limits = self._limits()
        if action.action == "wait":
            await self._sleep(wait_seconds(action, limits))
            return MessageType.ACK, Ack(ok=True)
        try:
            await self._call(self._perform, action, limits)
        except asyncio.CancelledError:
            # the request was abandoned mid-gesture: never leave a button or key down
            await asyncio.shield(self._call(self.session.release_all, pool=False))
            raise
        return MessageType.ACK, Ack(ok=True)

    # --- blocking operations (worker threads) ------------------------------------------

    def _monitors(self) -> list[Monitor]:
        return self.session.capture.monitors()

    def _perform(self, action: InputAction, limits: Limits) -> None:
        perform(action, self.session, self._monitors(), limits, self.clipboard)

    def _cursor(self) -> CursorPositionResponse:
        x, y = self.session.input.cursor()
        monitors = self._monitors()
        found = monitor_at(monitors, x, y)
        return CursorPositionResponse(x=x, y=y, monitor=found.index if found else 0)

    def _display_info(self) -> DisplayInfoResponse:
        return DisplayInfoResponse(
            displays=[
                DisplayDescription(
                    index=m.index,
                    primary=m.primary,
                    physical_size=[m.width, m.height],
                    logical_size=[m.width, m.height],
                    scale=1.0,
                    origin=[m.left, m.top],
                )
                for m in self._monitors()
            ]
        )

    def _list_windows(self) -> WindowListResponse:
        inspector = self.session.windows
        described = []
        for window in inspector.list_windows():
            window_id = self._window_id(window.xid)
            if window_id is None:
                continue  # closed while we listed
            described.append(
                WindowDescription(
                    window_id=window_id,
                    title=window.title,
                    app=window.app,
                    pid=window.pid,
                    bounds=_corners(window.bounds),
                    focused=window.focused,
                )
            )
        self._forget_vanished({w.window_id for w in described})
        return WindowListResponse(windows=described)

    def _forget_vanished(self, listed: set[str]) -> None:
        """Drop ids of windows that are gone (unmapped ones keep their tag, and their id)."""
        with self._ids_lock:
            unlisted = [(i, x) for i, x in self._ids.items() if i not in listed]
        for window_id, xid in unlisted:
            if self.session.windows.read_tag(xid, self._tag) != window_id:
                with self._ids_lock:
                    self._ids.forget(window_id)

    def _window_id(self, xid: int) -> str | None:
        """The minted id of a listed window: its tag if ours, else a new id it is tagged with."""
        inspector = self.session.windows
        tag = inspector.read_tag(xid, self._tag)
        with self._ids_lock:
            known = self._ids.known(xid, tag)
            if known is not None:
                return known
            minted = self._ids.mint(xid)
        if not inspector.write_tag(xid, self._tag, minted):
            with self._ids_lock:
                self._ids.forget(minted)
            return None
        return minted

    def _resolve(self, window_id: str) -> int:
        """The X id of the live window behind a minted id, else WINDOW_STALE (forever)."""
        with self._ids_lock:
            xid = self._ids.resolve(window_id)
        if xid is None:
            raise _stale(window_id)
        if self.session.windows.read_tag(xid, self._tag) != window_id:
            with self._ids_lock:
                self._ids.forget(window_id)
            raise _stale(window_id)
        return xid

    def _window_bounds(self, window_id: str) -> tuple[int, int, int, int]:
        xid = self._resolve(window_id)
        try:
            return self.session.windows.describe(xid).bounds
        except WindowGone:
            raise _stale(window_id) from None

    def _focus(self, window_id: str) -> Ack:
        xid = self._resolve(window_id)
        try:
            self.session.windows.focus(xid)
        except WindowGone:
            raise _stale(window_id) from None
        return Ack(ok=True)

    def _list_apps(self) -> AppListResponse:
        return AppListResponse(
            apps=[AppDescription(name=a.name, exec=a.exec) for a in self.apps.list()]
        )

    def _launch(self, request: AppLaunch) -> Ack:
        try:
            app = self.apps.find(request.app)
        except UnknownApp as exc:
            raise ProtocolError(
                ErrorCode.DEPENDENCY_MISSING,
                str(exc),
                details={"app": request.app, "available": [a.name for a in self.apps.list()]},
            ) from exc
        return Ack(ok=True, pid=launch(app, self.display, request.args))

    def _clipboard_read(self) -> ClipboardReadResponse:
        if not self.clipboard.read_opt_in:
            return ClipboardReadResponse(
                text=self.clipboard.readable(current=None, still_ours=False)
            )
        owner = self.session.clipboard
        text = self.clipboard.readable(current=owner.text, still_ours=owner.owns())
        return ClipboardReadResponse(text=text)

    def _clipboard_write(self, text: str) -> Ack:
        size = len(text.encode("utf-8"))
        limit = self._limits().max_file_size_bytes
        if size > limit:
            raise ProtocolError(
                ErrorCode.FILE_TOO_LARGE,
                f"clipboard text is {size} bytes; the limit is {limit}",
                details={"size_bytes": size, "max_file_size_bytes": limit},
            )
        self.session.clipboard.write(text)
        self.clipboard.record_write(text)
        return Ack(ok=True)

    def _permissions(self) -> PermissionsCheckResponse:
        return PermissionsCheckResponse(
            permissions={
                "screen_recording": _state(self._monitors),
                "accessibility": _state(lambda: self.session.input)
                if "input.click" in self.features
                else "unavailable",
                "clipboard_read": self.clipboard.permission(),
                "clipboard_write": "granted",
            }
        )


def _state(check: Callable[[], object]) -> str:
    """ "granted" if `check` works, "denied" if X refused us, else "unavailable"."""
    try:
        check()
    except DisplayAccessDenied:
        return "denied"
    except DesktopError:
        return "unavailable"
    return "granted"


def _corners(bounds: tuple[int, int, int, int]) -> list[int]:
    """(x, y, width, height) -> the wire's [x1, y1, x2, y2] (x2, y2 exclusive)."""
    x, y, width, height = bounds
    return [x, y, x + width, y + height]


def _stale(window_id: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.WINDOW_STALE,
        f"window {window_id} no longer exists; send WINDOW_LIST_REQUEST again",
        details={"window_id": window_id},
    )
