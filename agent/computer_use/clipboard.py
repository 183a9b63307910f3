"""Who may read the clipboard: nobody by default; opted in, only the agent's own recent text.

A remote model reading the user's clipboard would see passwords and private
text, so CLIPBOARD_READ answers CLIPBOARD_CONCEALED unless the local user
opted in, and even then only returns text that the agent itself wrote less
than `window_s` ago and that is *still* the clipboard (nobody copied anything
since). Writing is always allowed: the spec answers CLIPBOARD_WRITE with ACK,
and concealment is about reading. Sans-I/O: the caller says what the
clipboard holds now.
"""

from __future__ import annotations

from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError

#: How long the agent may read back text it wrote itself.
READ_BACK_WINDOW_S = 30.0


class ClipboardPolicy:
    def __init__(
        self, *, read_opt_in: bool, clock: Clock, window_s: float = READ_BACK_WINDOW_S
    ) -> None:
        self.read_opt_in = read_opt_in
        self._clock = clock
        self._window_s = window_s
        self._written: tuple[str, float] | None = None

    def record_write(self, text: str) -> None:
        """The agent just put `text` on the clipboard."""
        self._written = (text, self._clock.monotonic())

    def readable(self, *, current: str | None, still_ours: bool) -> str:
        """What a CLIPBOARD_READ may return; raises CLIPBOARD_CONCEALED otherwise.

        `current` is the text our selection owner serves and `still_ours`
        whether it still owns the clipboard.
        """
        if not self.read_opt_in:
            raise _concealed("clipboard reads are disabled on this agent")
        if self._written is None:
            raise _concealed("the agent has not written the clipboard")
        text, at = self._written
        if self._clock.monotonic() - at > self._window_s:
            raise _concealed(f"the agent's clipboard text is older than {self._window_s:g} s")
        if not still_ours or current != text:
            raise _concealed("the clipboard changed since the agent wrote it")
        return text

    def permission(self) -> str:
        """The value reported by PERMISSIONS_CHECK for clipboard reads."""
        return "own_writes_only" if self.read_opt_in else "denied"


def _concealed(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.CLIPBOARD_CONCEALED, message)
