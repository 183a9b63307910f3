"""Which interleaving a run took: the order of what crossed the wire.

An interleaving is the order of the events the neutral recorder writes —
connects, closes, frames by type, direction and id — times ignored. Two runs
with the same fingerprint delivered the same frames in the same order.

(A minimal version for `tetherbed explore`; the seeded sim scheduler's
branch owns this module and its richer fingerprint.)
"""

from __future__ import annotations

import hashlib

from tetherbed.simulator.history import History
from tetherbed.simulator.wiretap import records as wire


def fingerprint(history: History) -> str:
    """A short digest of the order of the wire events in `history`."""
    digest = hashlib.sha256()
    for record in history:
        if not record.process.startswith(wire.PREFIX) or record.type != "event":
            continue
        value = record.value if isinstance(record.value, dict) else {}
        parts = (
            record.process,
            str(record.f),
            str(value.get("dir", "")),
            str(value.get("type", "")),
            str(value.get("id", "")),
            str(value.get("code", "")),
        )
        digest.update("\x1f".join(parts).encode("utf-8", "replace") + b"\x1e")
    return digest.hexdigest()[:12]
