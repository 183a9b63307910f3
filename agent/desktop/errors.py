"""Typed failures of the desktop core.

The core knows nothing about any wire protocol; each front door (the
local-executor `ComputerUse`, the native adapter) maps these to its own codes.
"""

from __future__ import annotations


class DesktopError(Exception):
    """Base of every failure the desktop core reports."""


class DependencyMissing(DesktopError):
    """A library or program the operation needs is not installed."""


class DisplayUnavailable(DesktopError):
    """The X display cannot be reached (not running, wrong name, gone)."""


class DisplayAccessDenied(DisplayUnavailable):
    """The X server refused the connection: authorization is required."""


class WindowGone(DesktopError):
    """The window no longer exists (or its id now names another window)."""


class ClipboardError(DesktopError):
    """The clipboard could not be set or read back."""


class ImageTooLarge(DesktopError):
    """An image cannot be made to fit the byte budget it was given."""


class InputCancelled(DesktopError):
    """A long input (drag, hold_key) was cut short by `release_all()`."""


class UnknownKey(DesktopError, ValueError):
    """A key name that maps to no X keysym."""


class UntypableText(DesktopError, ValueError):
    """Text holding a character no key can produce (most control characters)."""
