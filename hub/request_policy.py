"""How long the hub waits for a request, and how it treats refusals and capacity.

Pure functions of the configuration and what the agent said; the core applies
them. Readings are recorded in docs/spec-notes.md ("Request deadlines").
"""

from __future__ import annotations

import msgspec

from tetherbed.hub.config import HubConfig
from tetherbed.wire.messages import MessageType

_EXECUTE = str(MessageType.EXECUTE_COMMAND)


class _CommandTimeout(msgspec.Struct):
    timeout_seconds: float | None = None


_command_timeout = msgspec.json.Decoder(_CommandTimeout)


def answer_budget(config: HubConfig, kind: str, payload: msgspec.Raw) -> float:
    """Seconds to wait for the answer to a request just issued.

    EXECUTE_COMMAND: its own `timeout_seconds` (or, without one, the agent's
    limit), capped at HELLO_ACK's `command_timeout_seconds` as the agent caps
    it, plus `command_slack`. Everything else: `request_timeout`.
    """
    if kind != _EXECUTE:
        return config.request_timeout
    cap = float(config.command_timeout_seconds)
    try:
        asked = _command_timeout.decode(payload).timeout_seconds
    except (msgspec.MsgspecError, RecursionError):
        asked = None  # the agent answers INVALID_MESSAGE soon enough
    timeout = cap if asked is None or asked <= 0 else min(asked, cap)
    return timeout + config.command_slack


def overload_delay(config: HubConfig, refusals: int) -> float | None:
    """Seconds before re-issuing a request refused `refusals` times with
    SHIM_OVERLOADED, or None when it should be given up (the client then gets
    the agent's SHIM_OVERLOADED, which says it never ran)."""
    if refusals > config.overload_retries:
        return None
    return min(config.overload_backoff * 2 ** (refusals - 1), config.overload_backoff_cap)


def capacity_from(limit: int, free: int, outstanding: int) -> int:
    """Requests the agent can take, from a response's `pending_capacity`.

    `free + outstanding` bounds the agent's limit from above (its own count of
    admitted requests is at most ours: some of ours may still be on the
    wire), so this never under-estimates, and it follows the agent both down
    and up, as the spec's "authoritative" asks. `limit` is the ceiling the
    handshake and STATUS set.
    """
    estimate = free + outstanding
    return estimate if estimate < limit else limit
