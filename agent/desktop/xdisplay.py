"""Opening X connections by display name, with failures sorted into typed errors.

python-xlib raises a handful of unrelated exceptions for "no server", "bad
name" and "not authorized"; callers only need to tell *unreachable* from
*refused*, because the protocol answers them differently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tetherbed.agent.desktop.errors import (
    DependencyMissing,
    DisplayAccessDenied,
    DisplayUnavailable,
)

if TYPE_CHECKING:
    from Xlib.display import Display


def open_display(name: str) -> Display:
    """A new python-xlib connection to `name` (":N"); the caller closes it."""
    try:
        from Xlib import error as xerror
        from Xlib.display import Display
    except ImportError as exc:  # pragma: no cover - the desktop extra installs it
        raise DependencyMissing("python-xlib is not installed") from exc
    try:
        return Display(name)
    except xerror.DisplayConnectionError as exc:
        text = str(exc)
        if "authoriz" in text.lower() or "protocol specified" in text.lower():
            raise DisplayAccessDenied(f"X server {name} refused the connection: {text}") from exc
        raise DisplayUnavailable(f"cannot connect to X display {name}: {text}") from exc
    except (xerror.DisplayError, OSError) as exc:
        raise DisplayUnavailable(f"cannot connect to X display {name}: {exc}") from exc


def diagnose(name: str, fallback: str) -> DisplayUnavailable:
    """Why `name` cannot be used, for libraries (mss/XCB) whose errors do not say.

    Opens a python-xlib connection to find out: refused means
    DisplayAccessDenied; anything else keeps `fallback` as the message.
    """
    try:
        connection = open_display(name)
    except DisplayUnavailable as exc:
        return exc if isinstance(exc, DisplayAccessDenied) else DisplayUnavailable(fallback)
    except DependencyMissing:
        return DisplayUnavailable(fallback)
    connection.close()
    return DisplayUnavailable(fallback)
