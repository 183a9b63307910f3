"""crossdesk-automation/1 requests: method table, strict argument parsing, in-flight ids.

Sans-I/O: `RequestTracker` turns a decoded line into a typed `Request` (or an error
to answer at once) and remembers which ids are in flight, so that a duplicate id is
refused and `cancel` can find its target. The driver runs requests concurrently and
reports completion; responses may therefore leave out of order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tetherbed.agent.native.actions import Action, parse_action
from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.framing import MAX_REQUEST_ID
from tetherbed.agent.native.validate import Fields

PROTOCOL = "crossdesk-automation/1"
DEFAULT_WAIT_MS = 1000
_DEVICE = re.compile(r"[0-9]{9}")
_ID32 = re.compile(r"[A-Za-z0-9_-]{32}")


@dataclass(frozen=True, slots=True)
class Region:
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class Request:
    id: int
    method: str
    args: dict[str, Any] = field(default_factory=dict)
    action: Action | None = None
    # The raw `observation_id` + `action` objects, for the operation cache's comparison.
    raw_action: dict[str, Any] | None = None


def _wait_args(f: Fields, args: dict[str, Any], max_edge: int) -> None:
    args["max_edge"] = f.int("max_edge", 64, max_edge, optional=True)
    args["after_frame_id"] = f.int("after_frame_id", 0, MAX_REQUEST_ID, optional=True)
    args["generation"] = f.int("generation", 0, 2**32 - 1, optional=True)
    if (args["after_frame_id"] is None) != (args["generation"] is None):
        raise NativeError(Code.INVALID_ARGUMENT, "`after_frame_id` and `generation` go together")
    args["timeout_ms"] = f.int("timeout_ms", 0, 5000, default=DEFAULT_WAIT_MS)


def _id32(f: Fields, key: str) -> str:
    value = f.str(key, max_len=32)
    if not _ID32.fullmatch(value):
        raise NativeError(Code.INVALID_ARGUMENT, f"`{key}` must be 32 base64url characters")
    return value


def _parse_args(
    method: str, f: Fields, defects: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], Action | None]:
    args: dict[str, Any] = {}
    action = None
    if method == "hello":
        args["protocol"] = f.str("protocol", max_len=64)
    elif method == "connect":
        device = f.str("device", max_len=9)
        if not _DEVICE.fullmatch(device):
            raise NativeError(Code.INVALID_ARGUMENT, "`device` must be 9 digits")
        args["device"] = device
        args["mode"] = f.choice("mode", ("observe", "control"))
        args["display"] = f.int("display", 0, 63)
        args["decode_path"] = f.choice("decode_path", ("browser", "minirtc"), default="browser")
        args["decoder"] = f.choice("decoder", ("auto", "software"), default="auto")
    elif method == "screenshot":
        region = f.object("region", optional=True)
        if region is not None:
            args["region"] = Region(
                region.int("x", 0, 65535),
                region.int("y", 0, 65535),
                region.int("width", 1, 65536),
                region.int("height", 1, 65536),
            )
            region.finish()
        else:
            args["region"] = None
        _wait_args(f, args, 4096 if "max_edge_unchecked" in defects else 2048)
    elif method == "preview":
        _wait_args(f, args, 960)
    elif method == "video_open":
        args["ticket"] = _id32(f, "ticket")
        args["view"] = _id32(f, "view")
        args["session"] = _id32(f, "session")
        args["view_generation"] = f.int("view_generation", 1, 2**53 - 1)
        args["origin"] = f.str("origin", max_len=256)
        args["apps"] = f.str("apps", max_len=256, optional=True)
    elif method == "video_revoke":
        args["view"] = _id32(f, "view") if f.has("view") else None
        f.skip("view")
    elif method == "action":
        args["operation_id"] = f.str("operation_id", max_len=128)
        args["observation_id"] = f.str("observation_id", max_len=64)
        nested = f.object("action")
        assert nested is not None
        action = parse_action(nested)
    elif method == "control":
        args["enabled"] = f.bool("enabled")
    elif method == "viewer_control":
        args["operation"] = f.choice("operation", ("pause", "resume", "disconnect"))
    elif method == "display":
        args["index"] = f.int("index", 0, 63)
    elif method == "cancel":
        args["request_id"] = f.int("request_id", 0, MAX_REQUEST_ID)
    return args, action


METHODS = frozenset(
    {
        "hello",
        "connect",
        "status",
        "screenshot",
        "video_open",
        "video_revoke",
        "preview",
        "action",
        "control",
        "viewer_control",
        "display",
        "cancel",
        "disconnect",
        "exit",
    }
)


def parse_request(obj: dict[str, Any], defects: frozenset[str] = frozenset()) -> Request:
    """A typed request, or NativeError. `obj` is a decoded JSON object; `defects` are
    planted defects (planted_defects.py), never set in normal use."""
    rid = obj.get("id")
    if type(rid) is not int or not 0 <= rid <= MAX_REQUEST_ID:
        raise NativeError(Code.INVALID_REQUEST, "`id` must be a nonnegative integer")
    method = obj.get("method")
    if not isinstance(method, str):
        raise NativeError(Code.INVALID_REQUEST, "`method` must be a string")
    if method not in METHODS:
        raise NativeError(Code.UNKNOWN_METHOD, f"unknown method {method[:64]!r}")
    fields = Fields(obj, lenient="accept_unknown_fields" in defects)
    fields.skip("id", "method")
    args, action = _parse_args(method, fields, defects)
    fields.finish()
    raw = None
    if method == "action":
        raw = {"observation_id": obj["observation_id"], "action": obj["action"]}
    return Request(rid, method, args, action, raw)


class RequestTracker:
    """Which request ids are in flight; refuses a second request under a live id."""

    def __init__(self, defects: frozenset[str] = frozenset()) -> None:
        self._live: set[int] = set()
        self._defects = defects

    def admit(self, obj: dict[str, Any]) -> Request:
        request = parse_request(obj, self._defects)
        if request.id in self._live:
            raise NativeError(Code.DUPLICATE_REQUEST_ID, f"request {request.id} is still running")
        self._live.add(request.id)
        return request

    def finish(self, request_id: int) -> None:
        self._live.discard(request_id)

    def live(self, request_id: int) -> bool:
        return request_id in self._live
