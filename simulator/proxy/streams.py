"""The two directions of a proxied connection, named as Toxiproxy names them.

`upstream` is client → server (agent → hub), `downstream` is server → client
(hub → agent). Faults that can hit either or both take a selector that also
accepts `both`.
"""

from __future__ import annotations

from typing import Literal

UPSTREAM: Literal["upstream"] = "upstream"
DOWNSTREAM: Literal["downstream"] = "downstream"
Stream = Literal["upstream", "downstream"]
StreamSelector = Literal["upstream", "downstream", "both"]
STREAMS: tuple[Stream, Stream] = (UPSTREAM, DOWNSTREAM)


def select_streams(selector: str) -> tuple[Stream, ...]:
    """The directions a selector names; ValueError for anything else."""
    if selector == "both":
        return STREAMS
    if selector == UPSTREAM:
        return (UPSTREAM,)
    if selector == DOWNSTREAM:
        return (DOWNSTREAM,)
    raise ValueError(f"stream must be upstream, downstream or both, not {selector!r}")
