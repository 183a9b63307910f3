"""How the adapter reaches a display: the shared desktop core, or a test's fakes.

Only this seam knows the core's classes, so the adapter's rules can be exercised
without X. Both calls block (X connections) and are made on worker threads.
"""

from __future__ import annotations

from typing import Any, Protocol


class DesktopBackend(Protocol):
    def open_capture(self, display: str) -> Any: ...

    def open_input(self, display: str) -> Any: ...


class CoreDesktop:
    """`tetherbed.agent.desktop`: mss capture and XTEST input."""

    def open_capture(self, display: str) -> Any:
        from tetherbed.agent.desktop.capture import ScreenCapture

        capture = ScreenCapture(display)
        capture.monitors()  # connects now, so an unreachable display fails the connect
        return capture

    def open_input(self, display: str) -> Any:
        from tetherbed.agent.desktop.input import InputDriver

        return InputDriver(display)


def check_keys(action: Any) -> None:
    """Refuse unknown key names and untypable text before anything is sent."""
    from tetherbed.agent.desktop.errors import UnknownKey, UntypableText
    from tetherbed.agent.desktop.keys import keysym_for_char, keysym_for_name, parse_sequence
    from tetherbed.agent.native.actions import Hotkey, KeyPress, TypeText
    from tetherbed.agent.native.errors import Code, NativeError

    try:
        if isinstance(action, KeyPress):
            parse_sequence(action.key)
        elif isinstance(action, Hotkey):
            for key in action.keys:
                keysym_for_name(key)
        elif isinstance(action, TypeText):
            for char in action.text.replace("\r\n", "\n"):
                keysym_for_char(char)
    except (UnknownKey, UntypableText) as exc:
        raise NativeError(Code.INVALID_ARGUMENT, str(exc)) from None
