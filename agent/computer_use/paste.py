"""`type` with paste: put the text on the clipboard, press ctrl+v, maybe put the old text back.

Pasting is how long or non-Latin text gets into apps fastest. With
preserve_clipboard the previous clipboard is read (only to restore it; it is
never returned to the platform) *before* anything happens, so a clipboard we
cannot restore - an image, rich content, or over 128 KiB - fails the action
with FEATURE_NOT_SUPPORTED without side effects. The old text goes back once
the target app has fetched the new one (or after PASTE_FETCH_TIMEOUT_S, if
nothing fetched it). Without preserve_clipboard the pasted text stays and
counts as the agent's own write for CLIPBOARD_READ.
"""

from __future__ import annotations

from tetherbed.agent.computer_use.clipboard import ClipboardPolicy
from tetherbed.agent.desktop.errors import ClipboardError
from tetherbed.agent.desktop.session import DesktopSession
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError

#: How long to wait for the focused app to fetch the pasted text.
PASTE_FETCH_TIMEOUT_S = 2.0
#: The key that pastes in almost every X11 app (terminals want ctrl+shift+v).
PASTE_KEY = "ctrl+v"


def paste_text(
    session: DesktopSession, policy: ClipboardPolicy, text: str, *, preserve: bool
) -> bool:
    """Paste `text` into the focused app; True if an app fetched it in time."""
    clipboard = session.clipboard
    previous: str | None = None
    if preserve:
        try:
            previous = clipboard.read_current()
        except ClipboardError as exc:
            raise ProtocolError(
                ErrorCode.FEATURE_NOT_SUPPORTED,
                f"cannot preserve the clipboard: {exc}",
                details={"reason": "clipboard_not_restorable"},
            ) from exc
    served = clipboard.served_count()
    clipboard.write(text)
    session.input.key(PASTE_KEY)
    fetched = clipboard.wait_served(served, PASTE_FETCH_TIMEOUT_S)
    if not preserve:
        policy.record_write(text)
    elif previous is None:
        clipboard.disown()
    else:
        clipboard.write(previous)
    return fetched
