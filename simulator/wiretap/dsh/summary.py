"""Which fields of a dsh-computers body the recorder keeps, by route and event.

Checkers need a few fields to follow an execution or a key across the hub
(`requestId`, `seq`, `computerId`, the key's digest) and people need a few to
read a timeline; everything else is summarised by the body's digest. Keys
and tokens are never kept: an enrollment key is kept as its digest, the
token of an enroll answer not at all. Output (stdout, stderr, chunk data) is
kept as size and digest (`data_digest`), the same digest the scenario's
client records for what the hub streamed to it.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tetherbed.simulator.wiretap.digest import data_digest
from tetherbed.wire.dsh import constants as C

_ROUTES = {
    C.url(C.Route.ENROLL): C.Route.ENROLL,
    C.url(C.Route.EVENTS): C.Route.EVENTS,
    C.url(C.Route.RESULTS): C.Route.RESULTS,
    C.url(C.Route.RESULTS_CHUNK): C.Route.RESULTS_CHUNK,
    C.url(C.Route.HEARTBEAT): C.Route.HEARTBEAT,
    C.url(C.Route.FS_RESULT): C.Route.FS_RESULT,
}
#: Short text fields kept as they are, up to this many characters.
TEXT_KEPT = 200


def route_of(path: object) -> str | None:
    """The agent route a path names (`/agent/results`), also behind a path prefix."""
    if not isinstance(path, str):
        return None
    for full, route in _ROUTES.items():
        if path == full or path.endswith(full):
            return route
    return None


def text_summary(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    data = text.encode("utf-8")
    return {"size": len(data), "digest": data_digest(data)}


def base64_summary(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return {"size": None, "digest": None, "invalid": True}
    return {"size": len(data), "digest": data_digest(data)}


def credential_digest(value: Any) -> str | None:
    return data_digest(value.encode("utf-8")) if isinstance(value, str) else None


def _pick(body: dict[str, Any], *names: str) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for name in names:
        if name in body:
            value = body[name]
            if isinstance(value, str) and len(value) > TEXT_KEPT:
                value = value[: TEXT_KEPT - 1] + "…"
            if isinstance(value, str | int | float | bool) or value is None:
                kept[name] = value
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                kept[name] = value[:16]
    return kept


def request_fields(path: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        return {}
    route = route_of(path)
    if route == C.Route.ENROLL:
        machine = body.get("machine") if isinstance(body.get("machine"), dict) else {}
        kept = _pick(body, "agentVersion")
        kept["keyDigest"] = credential_digest(body.get("key"))
        kept.update(_pick(machine, "name", "hostname"))
        return kept
    if route == C.Route.RESULTS:
        kept = _pick(
            body, "requestId", "ok", "exitCode", "signal", "timedOut", "truncated", "error"
        )
        kept["stdout"] = text_summary(body.get("stdout"))
        kept["stderr"] = text_summary(body.get("stderr"))
        return kept
    if route == C.Route.RESULTS_CHUNK:
        kept = _pick(body, "requestId", "seq", "type")
        for name in ("stdout", "stderr", "data"):
            if name in body:
                kept[name] = base64_summary(body.get(name))
        return kept
    if route == C.Route.HEARTBEAT:
        meta = body.get("meta") if isinstance(body.get("meta"), dict) else {}
        return {**_pick(meta, "agentVersion"), **_pick(body, "capabilities")}
    if route == C.Route.FS_RESULT:
        return _pick(body, "requestId", "ok", "op", "error")
    return {}


def response_fields(path: str, status: int, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        return {}
    if status >= 400:
        return _pick(body, "error")
    route = route_of(path)
    if route == C.Route.ENROLL:
        return _pick(body, "computerId", "name")  # never the token
    if route == C.Route.HEARTBEAT:
        return _pick(body, "ok", "name")
    return _pick(body, "ok")


def event_fields(event: str, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        return {}
    if event == C.Event.HELLO:
        return _pick(data, "computerId", "name", "heartbeatMs", "capabilities", "features")
    if event == C.Event.EXEC:
        kept = _pick(data, "requestId", "timeoutMs", "stream", "shell")
        kept["command"] = text_summary(data.get("command"))
        return kept
    if event == C.Event.CANCEL:
        return _pick(data, "requestId")
    if event == C.Event.CONFIG:
        return _pick(data, "name", "execEnabled")
    if event == C.Event.FS:
        return _pick(data, "requestId", "op")
    return {}  # ping: its `t` is the hub's wall clock
