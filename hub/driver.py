"""What every hub driver does with the core's actions: one source for both.

The aiohttp server and the simulator's hub differ in how bytes move; what an
action means does not. Peers are `Outbox`es, so carrying out a `Send` is an
append that never waits; `Record` goes to the journal, `Persist` and
`Authorize` to the store, and `Authorize`'s answer back into the core.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tetherbed.hub.actions import Actions, Authorize, Close, Persist, Record, Send
from tetherbed.hub.admission import session_access
from tetherbed.hub.core import HubCore
from tetherbed.hub.store import HubStore


def _no_journal(event: str, **fields: Any) -> None:
    return None


def _no_count(code: int) -> None:
    return None


class ActionRunner:
    def __init__(
        self,
        core: HubCore,
        store: HubStore,
        observer: Callable[..., None] | None = None,
        *,
        on_close: Callable[[int], None] | None = None,
    ) -> None:
        """`on_close` is told the code of every Close carried out (metrics)."""
        self.core = core
        self.store = store
        self.observer = observer or _no_journal
        self.on_close = on_close or _no_count
        #: The `head_of_line` defect: send inside the sender's read loop.
        self.inline = "head_of_line" in core.config.defects

    def apply(self, actions: Actions) -> None:
        for action in actions:
            kind = type(action)
            if kind is Send:
                action.peer.put(action.data)  # type: ignore[union-attr]
            elif kind is Close:
                self.on_close(action.code)  # type: ignore[union-attr]
                action.peer.close_after(action.code, action.reason)  # type: ignore[union-attr]
            elif kind is Record:
                self.observer(action.event, **action.fields)  # type: ignore[union-attr]
            elif kind is Persist:
                grant = action.fact  # type: ignore[union-attr]
                self.store.save_grant(
                    grant.user, grant.session_id, grant.machine_id, grant.root_grant
                )
            elif kind is Authorize:
                assert isinstance(action, Authorize)
                allowed = session_access(self.store, action.user, action.session_id)
                self.apply(self.core.authorized(action.ticket, allowed))

    async def apply_inline(self, actions: Actions) -> None:
        """The head-of-line defect: every Send awaited where it was decided."""
        for action in actions:
            if type(action) is Send:
                await action.peer.send_now(action.data)
            else:
                self.apply((action,))
