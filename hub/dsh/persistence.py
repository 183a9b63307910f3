"""The registry's records as rows of the hub's SQLite store, and back.

A batch of changes from the core is written in one transaction, so a crash
never leaves a key consumed without its computer or the other way round.
The in-clear pending key (`PendingKey.key`) is never written.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from tetherbed.hub.dsh.actions import Change, DropComputer, DropKey, PutComputer, PutKey
from tetherbed.hub.dsh.records import Computer, PendingKey
from tetherbed.hub.store import HubStore

_COMPUTER_FIELDS = [f.name for f in dataclasses.fields(Computer)]
_KEY_FIELDS = [f.name for f in dataclasses.fields(PendingKey) if f.name != "key"]


def _computer_json(computer: Computer) -> str:
    record: dict[str, Any] = {name: getattr(computer, name) for name in _COMPUTER_FIELDS}
    if record["capabilities"] is not None:
        record["capabilities"] = list(record["capabilities"])
    return json.dumps(record, separators=(",", ":"), sort_keys=True)


def _computer(record: dict[str, Any]) -> Computer:
    kept = {name: record[name] for name in _COMPUTER_FIELDS if name in record}
    if kept.get("capabilities") is not None:
        kept["capabilities"] = tuple(kept["capabilities"])
    return Computer(**kept)


def _key_json(key: PendingKey) -> str:
    record = {name: getattr(key, name) for name in _KEY_FIELDS}
    return json.dumps(record, separators=(",", ":"), sort_keys=True)


def _key(record: dict[str, Any]) -> PendingKey:
    return PendingKey(**{name: record[name] for name in _KEY_FIELDS if name in record})


def load(store: HubStore) -> tuple[list[Computer], list[PendingKey]]:
    computer_rows, key_rows = store.dsh_rows()
    computers = [_computer(json.loads(row[3])) for row in computer_rows]
    keys = [_key(json.loads(row[2])) for row in key_rows]
    return computers, keys


def write(store: HubStore, changes: Iterable[Change]) -> None:
    """One transaction for the batch; later changes to a record win."""
    computers: dict[str, Computer | None] = {}
    keys: dict[str, PendingKey | None] = {}
    for change in changes:
        if isinstance(change, PutComputer):
            computers[change.computer.id] = change.computer
        elif isinstance(change, DropComputer):
            computers[change.computer_id] = None
        elif isinstance(change, PutKey):
            keys[change.key.digest] = change.key
        elif isinstance(change, DropKey):
            keys[change.digest] = None
    if not computers and not keys:
        return
    store.dsh_write(
        [(c.id, c.user, c.token_hash, _computer_json(c)) for c in computers.values() if c],
        [cid for cid, c in computers.items() if c is None],
        [(k.digest, k.user, _key_json(k)) for k in keys.values() if k],
        [d for d, k in keys.items() if k is None],
    )
