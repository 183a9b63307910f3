"""Planted defects of the native adapter, for proving conformance cases catch them.

`tetherbed native --defect NAME` (never in normal use) swaps a part for one
with a deliberate departure from crossdesk-automation/1:

- `accept_unknown_fields`: fields the protocol does not name are ignored.
- `max_edge_unchecked`: `screenshot` takes a max_edge up to 4096.
- `operation_cache_ignores_arguments`: an operation id reused with other
  arguments returns the first result instead of conflicting.
- `observations_survive_generation`: a display change leaves old observations
  valid.
- `blocked_pipe_never_exits`: a caller that stops reading stdout leaves the
  adapter hanging forever.
- `ticket_reusable`: a video ticket can be presented again.
- `accept_over_deep`: a request nested deeper than 32 levels is parsed and
  answered like any other instead of being refused with NESTING_TOO_DEEP
  (found by `tetherbed fuzz native`).
- `doctor_pipe_only`: `doctor --json` leaves out `automation_video_transport`,
  as an old pipe-only CLI does (the adapter itself still offers video, so its
  `hello` and its doctor disagree).
"""

from __future__ import annotations

from typing import Any

from tetherbed.agent.native.observations import Observation, ObservationStore
from tetherbed.agent.native.operations import Entry, OperationCache
from tetherbed.agent.native.tickets import Grant, TicketBook

NATIVE_DEFECTS = frozenset(
    {
        "accept_unknown_fields",
        "max_edge_unchecked",
        "operation_cache_ignores_arguments",
        "observations_survive_generation",
        "blocked_pipe_never_exits",
        "ticket_reusable",
        "accept_over_deep",
        "doctor_pipe_only",
    }
)


def doctor_fields(fields: dict[str, Any], defects: frozenset[str]) -> dict[str, Any]:
    """`doctor --json`'s fields with the doctor's planted defects applied."""
    if "doctor_pipe_only" in defects:
        from tetherbed.wire.crossdesk import DOCTOR_VIDEO_TRANSPORT

        return {k: v for k, v in fields.items() if k != DOCTOR_VIDEO_TRANSPORT}
    return fields


class ArgumentBlindCache(OperationCache):
    def lookup(self, operation_id: str, arguments: Any, now: float) -> Entry | None:
        return self._entries.get(operation_id)


class LastingObservations(ObservationStore):
    def get(
        self, observation_id: str, *, generation: int, geometry_epoch: int, now: float
    ) -> Observation:
        kept = self._entries.get(observation_id)
        if kept is not None:
            return kept
        return super().get(
            observation_id, generation=generation, geometry_epoch=geometry_epoch, now=now
        )

    def invalidate(self) -> None:
        return None


class ReusableTickets(TicketBook):
    def redeem(self, ticket: str, origin: str | None, display_generation: int, now: float) -> Grant:
        grant = super().redeem(ticket, origin, display_generation, now)
        self._grants[ticket] = grant
        return grant


def plant(adapter: Any, defects: frozenset[str]) -> None:
    """Swap the adapter's parts for the defective ones named in `defects`."""
    if "operation_cache_ignores_arguments" in defects:
        adapter.operations = ArgumentBlindCache()
    if "observations_survive_generation" in defects:
        adapter.observations = LastingObservations()


def plant_in_listener(listener: Any, defects: frozenset[str]) -> None:
    if "ticket_reusable" in defects:
        listener.tickets = ReusableTickets()
