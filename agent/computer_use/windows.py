"""Shim-minted window ids (`win_<uuid4>`): stable while a window lives, never reused.

The platform must not see X ids: the server recycles them (a new client can
be handed the resource-id range of one that left), so an old id could
silently start naming someone else's window. Each window gets one minted id
the first time it is listed, and the id is also written *onto the window* as
a property (see WindowTags). An id resolves only while its window still
carries that tag; a recycled X id belongs to a window without the tag, so it
is minted a fresh id and the old one stays stale forever. Sans-I/O: the
caller reads and writes the tags.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable


class WindowIds:
    """Minted id <-> X id, for the windows this agent has listed."""

    def __init__(self, new_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self._new_uuid = new_uuid
        self._xid_of: dict[str, int] = {}

    def known(self, xid: int, tag: str | None) -> str | None:
        """The id of window `xid` if its tag is one we minted for that very X id."""
        if tag is not None and self._xid_of.get(tag) == xid:
            return tag
        return None

    def mint(self, xid: int) -> str:
        """A fresh id for an untagged window; ids minted earlier for `xid` die."""
        for old in [i for i, x in self._xid_of.items() if x == xid]:
            del self._xid_of[old]
        minted = f"win_{self._new_uuid()}"
        self._xid_of[minted] = xid
        return minted

    def resolve(self, window_id: str) -> int | None:
        """The X id a minted id was given to (the caller must still check the tag)."""
        return self._xid_of.get(window_id)

    def forget(self, window_id: str) -> None:
        self._xid_of.pop(window_id, None)

    def items(self) -> list[tuple[str, int]]:
        """Every (minted id, X id) still remembered."""
        return list(self._xid_of.items())

    def __len__(self) -> int:
        return len(self._xid_of)
