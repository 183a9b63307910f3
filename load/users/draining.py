"""The end of a run: clients stop sending and wait for what is still unanswered.

When Locust stops a test it kills the users. A request killed in flight would
look lost; so on `test_stopping` (before any user is stopped) every client of
this process stops sending and the process waits, up to the plan's request
timeout, until each has its answers. The load agents keep serving meanwhile.
"""

from __future__ import annotations

import time

import gevent

from tetherbed.load.users.hub_client import HubClient


class _State:
    #: Clients stop sending new requests once this is set.
    stopping = False


state = _State()
_live: set[HubClient] = set()
#: How often the wait looks at the clients.
POLL_SECONDS = 0.05


def track(client: HubClient) -> None:
    _live.add(client)


def forget(client: HubClient) -> None:
    _live.discard(client)


def drain(timeout: float) -> int:
    """Stop sending; wait until no client of this process waits for an answer.
    The requests still unanswered after `timeout` seconds."""
    state.stopping = True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = sum(client.outstanding for client in _live if client.closed is None)
        if not left:
            return 0
        gevent.sleep(POLL_SECONDS)
    return sum(client.outstanding for client in _live if client.closed is None)
