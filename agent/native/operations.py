"""The operation cache: one answer per operation id, so a retry never repeats input.

128 entries; entries older than five minutes may be removed when a new action
arrives. Younger entries are never evicted — when all 128 are young, a new id is
refused (`OPERATION_CACHE_FULL`, retryable) rather than forgetting an id whose
retry could then run twice.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tetherbed.agent.native.errors import Code, NativeError

MAX_OPERATIONS = 128
OPERATION_TTL_S = 300.0
_canonical = msgspec.json.Encoder(order="sorted")


def fingerprint(arguments: Any) -> bytes:
    """Canonical JSON: key order and whitespace do not make arguments differ."""
    return _canonical.encode(arguments)


@dataclass(slots=True)
class Entry:
    operation_id: str
    fingerprint: bytes
    created_at: float
    result: dict[str, Any] | None = None  # None while the action runs
    request_ids: list[int] = field(default_factory=list)


class OperationCache:
    def __init__(self) -> None:
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, operation_id: str, arguments: Any, now: float) -> Entry | None:
        """The existing entry for a retry, None for a new id; a conflict raises."""
        entry = self._entries.get(operation_id)
        if entry is None:
            return None
        if entry.fingerprint != fingerprint(arguments):
            raise NativeError(
                Code.OPERATION_CONFLICT,
                "this operation_id was used with different arguments",
            )
        return entry

    def start(self, operation_id: str, arguments: Any, now: float) -> Entry:
        """Record a new operation (call after `lookup` returned None)."""
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if now - oldest.created_at < OPERATION_TTL_S or oldest.result is None:
                break
            self._entries.popitem(last=False)
        if len(self._entries) >= MAX_OPERATIONS:
            raise NativeError(
                Code.OPERATION_CACHE_FULL, "128 operations younger than five minutes are cached"
            )
        entry = Entry(operation_id, fingerprint(arguments), now)
        self._entries[operation_id] = entry
        return entry

    def finish(self, entry: Entry, result: dict[str, Any]) -> None:
        entry.result = result

    def forget(self, entry: Entry) -> None:
        """Drop an entry whose action sent nothing, so the same id can run later."""
        if self._entries.get(entry.operation_id) is entry:
            del self._entries[entry.operation_id]
