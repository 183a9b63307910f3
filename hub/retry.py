"""The hub's retry rules, from the spec's idempotency table.

A request that died with its agent connection is re-issued after the agent
reconnects only when re-running it is harmless; FILE_DELETE is re-issued with
`missing_ok: true` so a delete that did happen is not reported as missing.
Everything else gets OUTCOME_UNKNOWN: the hub cannot know whether it ran.
"""

from __future__ import annotations

import msgspec

from tetherbed.hub.links import Route
from tetherbed.wire import catalog
from tetherbed.wire.messages import MessageType

#: A request re-issued this many times (each time its connection died) is
#: given up: it may be what kills the agent.
MAX_ATTEMPTS = 3


def can_retry(route: Route, *, everything: bool = False) -> bool:
    """`everything` is the retry_non_idempotent defect: the v0 mistake."""
    return (everything or catalog.is_idempotent(route.kind)) and route.attempts < MAX_ATTEMPTS


def prepare_retry(route: Route, *, counter: bool = False) -> Route:
    """The route, ready to be issued again (payload adjusted where the spec says).

    `counter` is the `reissue_unlabelled` defect: the payload gains a retry
    counter, so that it no longer matches the first attempt byte for byte."""
    route.attempts += 1
    if counter:
        payload = msgspec.json.decode(route.envelope.payload)
        if isinstance(payload, dict):
            payload["retry"] = route.attempts
            route.envelope.payload = msgspec.Raw(msgspec.json.encode(payload))
    if route.kind == MessageType.FILE_DELETE:
        payload = msgspec.json.decode(route.envelope.payload)
        if isinstance(payload, dict) and not payload.get("missing_ok"):
            payload["missing_ok"] = True
            route.envelope.payload = msgspec.Raw(msgspec.json.encode(payload))
    return route
