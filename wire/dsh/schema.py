"""The dsh-computers messages as the spec shows them: fields and JSON types.

One description serves two readers. `problems(value, shape, strict=True)` is a
strict peer: any field the spec does not show, a missing field, or a wrong type
is a problem; the tests of every body and event Tetherbed sends use it, and so
will the conformance checkers. `problems(..., strict=False)` is how Tetherbed
receives: unknown fields are ignored and only what it needs must be present.

(The local-executor spec's strict twin is `wire/strict.py`, built on msgspec;
this one is plain Python because the standalone agent imports it.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NULL = type(None)
STR: tuple[type, ...] = (str,)
INT: tuple[type, ...] = (int,)
NUM: tuple[type, ...] = (int, float)
BOOL: tuple[type, ...] = (bool,)
LIST: tuple[type, ...] = (list,)
OBJ: tuple[type, ...] = (dict,)


@dataclass(frozen=True, slots=True)
class Field:
    types: tuple[type, ...]
    #: A strict peer requires the field; a lenient one only when `needed`.
    required: bool = True
    needed: bool = False
    #: For objects: their own shape; for lists: the shape of each item.
    shape: Shape | None = None
    items: tuple[type, ...] | None = None


Shape = Mapping[str, Field]


def f(
    *types: type,
    required: bool = True,
    needed: bool = False,
    shape: Shape | None = None,
    items: tuple[type, ...] | None = None,
) -> Field:
    flat: list[type] = []
    for t in types:
        flat.extend(t if isinstance(t, tuple) else (t,))
    return Field(tuple(flat), required, needed, shape, items)


def opt(*types: type, shape: Shape | None = None, items: tuple[type, ...] | None = None) -> Field:
    return f(*types, required=False, shape=shape, items=items)


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int):
        return int in types
    if isinstance(value, float):
        return float in types
    return any(
        t is not bool and t is not int and t is not float and isinstance(value, t) for t in types
    )


def _type_names(types: tuple[type, ...]) -> str:
    names = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        list: "array",
        dict: "object",
        NULL: "null",
    }
    if int in types and float in types:
        types = tuple(t for t in types if t is not int)
    return " or ".join(names.get(t, t.__name__) for t in types)


def problems(value: Any, shape: Shape, *, strict: bool = True, at: str = "$") -> list[str]:
    """What is wrong with `value` for `shape`; empty when it fits."""
    if not isinstance(value, dict):
        return [f"{at}: expected an object"]
    found: list[str] = []
    for name, spec in shape.items():
        where = f"{at}.{name}"
        if name not in value:
            if spec.needed or (strict and spec.required):
                found.append(f"{where}: missing")
            continue
        item = value[name]
        if not _type_ok(item, spec.types):
            found.append(f"{where}: expected {_type_names(spec.types)}")
            continue
        if spec.shape is not None and isinstance(item, dict):
            found += problems(item, spec.shape, strict=strict, at=where)
        if isinstance(item, list) and (spec.shape is not None or spec.items is not None):
            for index, element in enumerate(item):
                here = f"{where}[{index}]"
                if spec.shape is not None:
                    found += problems(element, spec.shape, strict=strict, at=here)
                elif spec.items is not None and not _type_ok(element, spec.items):
                    found.append(f"{here}: expected {_type_names(spec.items)}")
    if strict:
        found += [f"{at}.{name}: not in the spec" for name in value if name not in shape]
    return found


def fits(value: Any, shape: Shape, *, strict: bool = True) -> bool:
    return not problems(value, shape, strict=strict)


# --- agent → host (§3, §11) ----------------------------------------------------

MACHINE: Shape = {
    "hostname": opt(STR),
    "name": opt(STR),
    "os": opt(STR),
    "arch": opt(STR),
    "platform": opt(STR),
    "cpuModel": opt(STR),
    "memoryBytes": opt(INT),
    "nodeVersion": opt(STR),
}

#: §11.6.1's handshake metadata block (the spec does not name its field;
#: Tetherbed sends it as "metadata").
METADATA: Shape = {
    "version": f(INT),
    "agentVersion": f(STR),
    "hostname": f(STR),
    "os": f(STR),
    "arch": f(STR),
    "capabilities": f(LIST, items=STR),
    "workspaceBase": f(STR),
}

ENROLL_REQUEST: Shape = {
    "key": f(STR, needed=True),
    "agentVersion": f(STR),
    "machine": f(OBJ, shape=MACHINE),
    "capabilities": opt(LIST, items=STR),
    "metadata": opt(OBJ, shape=METADATA),
}

ENROLL_RESPONSE: Shape = {
    "computerId": f(STR),
    "token": f(STR),
    "name": f(STR),
    "serverUrl": f(STR),
}

ERROR_BODY: Shape = {"error": f(STR), "message": opt(STR)}

RESULT: Shape = {
    "requestId": f(STR, needed=True),
    "ok": f(BOOL),
    "exitCode": f(INT, NULL),
    "signal": f(STR, NULL),
    "stdout": f(STR),
    "stderr": f(STR),
    "durationMs": f(NUM),
    "truncated": f(BOOL),
    "timedOut": f(BOOL),
    "error": f(STR, NULL),
}

#: §11.2's chunk: base64 stdout/stderr under a sequence number.
CHUNK: Shape = {
    "requestId": f(STR, needed=True),
    "seq": f(INT, needed=True),
    "stdout": f(STR),
    "stderr": f(STR),
}

#: §11.6.2's typed frame: one stream (or a heartbeat) per chunk.
TYPED_CHUNK: Shape = {
    "requestId": f(STR, needed=True),
    "seq": f(INT, needed=True),
    "type": f(STR, needed=True),
    "data": f(STR),
}

CHUNK_TYPES = ("stdout", "stderr", "heartbeat")

HEARTBEAT_META: Shape = {
    "cpuModel": opt(STR),
    "memoryBytes": opt(INT),
    "agentVersion": opt(STR),
}

HEARTBEAT: Shape = {
    "meta": f(OBJ, shape=HEARTBEAT_META),
    "capabilities": opt(LIST, items=STR),
    "metadata": opt(OBJ, shape=METADATA),
}

FS_ENTRY: Shape = {
    "name": f(STR),
    "path": f(STR),
    "type": f(STR),
    "size": f(INT),
    "mtimeMs": f(NUM),
}

FS_STAT: Shape = {
    "type": f(STR),
    "size": f(INT),
    "mtimeMs": f(NUM),
    "mode": f(INT),
}

FS_MATCH: Shape = {"path": f(STR), "line": f(INT), "text": f(STR)}

#: §11.3: every field but requestId/ok/op/path/error is op-specific and optional.
FS_RESULT: Shape = {
    "requestId": f(STR, needed=True),
    "ok": f(BOOL, needed=True),
    "op": f(STR),
    "path": f(STR),
    "content": opt(STR),
    "text": opt(STR),
    "encoding": opt(STR),
    "bytes": opt(INT),
    "lines": opt(INT),
    "truncated": opt(BOOL),
    "entries": opt(LIST, shape=FS_ENTRY),
    "stat": opt(OBJ, NULL, shape=FS_STAT),
    "matches": opt(LIST, shape=FS_MATCH),
    "error": f(STR, NULL),
}

# --- host → agent: SSE event data (§3.2, §11) --------------------------------

HELLO: Shape = {
    "computerId": f(STR, needed=True),
    "name": f(STR),
    "heartbeatMs": f(INT),
    "capabilities": opt(LIST, items=STR),
    "features": opt(LIST, items=STR),
}

EXEC: Shape = {
    "requestId": f(STR, needed=True),
    "command": f(STR, needed=True),
    "cwd": f(STR, NULL),
    "timeoutMs": f(INT),
    "shell": f(STR),
    "stream": opt(BOOL),
}

CANCEL: Shape = {"requestId": f(STR, needed=True)}
PING: Shape = {"t": f(INT)}
CONFIG: Shape = {"name": f(STR), "execEnabled": f(BOOL)}

#: §11.3: op-specific fields besides requestId/op/path. The spec shows only
#: read's; the rest are Tetherbed's reading (docs/spec-notes.md).
FS_REQUEST: Shape = {
    "requestId": f(STR, needed=True),
    "op": f(STR, needed=True),
    "path": opt(STR),
    "encoding": opt(STR),
    "offset": opt(INT),
    "limit": opt(INT),
    "content": opt(STR),
    "createDirs": opt(BOOL),
    "newPath": opt(STR),
    "recursive": opt(BOOL),
    "pattern": opt(STR),
    "cwd": opt(STR),
    "include": opt(STR),
    "maxMatches": opt(INT),
}

# --- browser → host (§4) -----------------------------------------------------

CREATE_KEY: Shape = {
    "os": opt(STR),
    "replace": opt(BOOL),
    "label": opt(STR, NULL),
}

KEY_CREATED: Shape = {
    "key": f(STR),
    "os": f(STR),
    "expiresAt": f(STR),
    "serverUrl": f(STR),
    "command": f(STR),
    "windowsCommand": f(STR),
    "installUrl": f(STR),
}

BOTS: Shape = {"used": f(INT), "total": f(INT)}

STATE_COMPUTER: Shape = {
    "id": f(STR),
    "name": f(STR),
    "hostname": f(STR),
    "os": f(STR),
    "platformLabel": f(STR),
    "online": f(BOOL),
    "lastSeenAt": f(STR, NULL),
    "createdAt": f(STR),
    "agentVersion": f(STR),
    "cpuModel": f(STR),
    "memoryBytes": f(INT),
    "bots": f(OBJ, shape=BOTS),
    # §11.1 and §11.6
    "capabilities": opt(LIST, items=STR),
    "workspaceBase": opt(STR, NULL),
    "drift": opt(BOOL),
    "updateRequired": opt(BOOL),
}

PENDING_KEY: Shape = {"key": f(STR), "expiresAt": f(STR), "os": f(STR)}

STATE: Shape = {
    "version": f(INT),
    "serverUrl": f(STR),
    "heartbeatMs": f(INT),
    "computers": f(LIST, shape=STATE_COMPUTER),
    "pendingKey": f(OBJ, NULL, shape=PENDING_KEY),
    "role": opt(STR),
}

KEY_STATUS_COMPUTER: Shape = {"id": f(STR), "name": f(STR), "online": f(BOOL)}
KEY_STATUS: Shape = {
    "status": f(STR),
    "computer": f(OBJ, NULL, shape=KEY_STATUS_COMPUTER),
}

DELETE: Shape = {"id": f(STR, needed=True)}
RENAME: Shape = {"id": f(STR, needed=True), "name": f(STR, needed=True)}
OK: Shape = {"ok": f(BOOL)}
RENAMED: Shape = {"ok": f(BOOL), "name": f(STR)}
HEARTBEAT_ANSWER: Shape = {"ok": f(BOOL), "name": f(STR)}

HEALTH: Shape = {
    "ok": f(BOOL),
    "version": f(STR),
    "computers": f(INT),
    "online": f(INT),
}

KEY_STATUSES = ("waiting", "connected", "expired", "used", "unknown")

RUNTIME_STATUS: Shape = {
    "configured": f(BOOL),
    "enabled": f(BOOL),
    "connected": f(BOOL),
    "serverUrl": f(STR, NULL),
    "computerId": f(STR, NULL),
    "name": f(STR, NULL),
    "since": f(STR, NULL),
    "lastError": f(STR, NULL),
}
RUNTIME_CONNECT: Shape = {"serverUrl": f(STR, needed=True), "key": f(STR, needed=True)}
RUNTIME_ENABLE: Shape = {"enabled": f(BOOL, needed=True)}
