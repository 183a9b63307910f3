"""Reading request bodies: lenient in what is accepted, exact in what is kept.

Unknown fields are ignored; a field of the wrong type, or a missing field the
hub needs, is a `BadRequest` whose message names the field. Free text from
agents (host names, CPU models) is trimmed to a sane length, since it is shown
in a page and in model prompts.
"""

from __future__ import annotations

import base64
import binascii
import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh import schema

TEXT_FIELD_MAX = 256


class BadRequest(ValueError):
    """400 bad-request, with a message that names the problem."""


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None


def check(value: Any, shape: schema.Shape) -> dict[str, Any]:
    found = schema.problems(value, shape, strict=False)
    if found:
        raise BadRequest("; ".join(found[:5]))
    return value


def text(value: Any, limit: int = TEXT_FIELD_MAX) -> str:
    """A printable single-line string (control characters dropped), trimmed."""
    if not isinstance(value, str):
        return ""
    kept = "".join(ch for ch in value if unicodedata.category(ch)[0] != "C")
    return kept.strip()[:limit]


def display_name(value: Any) -> str:
    """§4.5: 1-64 visible characters after trimming, or BadRequest."""
    if not isinstance(value, str):
        raise BadRequest("name must be a string")
    name = value.strip()
    if any(unicodedata.category(ch)[0] == "C" for ch in name):
        raise BadRequest("name must not contain control characters")
    if not name or not any(not ch.isspace() for ch in name):
        raise BadRequest("name must have 1-64 visible characters")
    if len(name) > C.NAME_MAX_CHARS:
        raise BadRequest(f"name must have at most {C.NAME_MAX_CHARS} characters")
    return name


def fitted_name(value: Any) -> str:
    """A name from an agent, cut to fit instead of refused."""
    return text(value, C.NAME_MAX_CHARS)


def capabilities(value: Any) -> tuple[str, ...] | None:
    """The reported capabilities, known names only, in the spec's order."""
    if not isinstance(value, list):
        return None
    reported = {item for item in value if isinstance(item, str)}
    return tuple(name for name in C.CAPABILITIES if name in reported)


@dataclass(frozen=True, slots=True)
class Enrollment:
    key: str
    agent_version: str
    hostname: str
    name: str
    os: str
    arch: str
    platform_label: str
    cpu_model: str
    memory_bytes: int
    node_version: str
    capabilities: tuple[str, ...] | None
    workspace_base: str | None


def parse_enroll(value: Any) -> Enrollment:
    body = check(value, schema.ENROLL_REQUEST)
    machine = body.get("machine") or {}
    metadata = body.get("metadata") or {}
    caps = capabilities(body.get("capabilities"))
    if caps is None:
        caps = capabilities(metadata.get("capabilities"))
    os_name = text(machine.get("os")) or text(metadata.get("os"))
    hostname = text(machine.get("hostname")) or text(metadata.get("hostname"))
    memory = machine.get("memoryBytes")
    return Enrollment(
        key=body["key"],
        agent_version=text(body.get("agentVersion")) or text(metadata.get("agentVersion")),
        hostname=hostname,
        name=fitted_name(machine.get("name")) or fitted_name(hostname),
        os=os_name,
        arch=text(machine.get("arch")) or text(metadata.get("arch")),
        platform_label=text(machine.get("platform"))
        or C.PLATFORM_LABELS.get(os_name, C.UNKNOWN_PLATFORM_LABEL),
        cpu_model=text(machine.get("cpuModel")),
        memory_bytes=memory if isinstance(memory, int) and memory >= 0 else 0,
        node_version=text(machine.get("nodeVersion")),
        capabilities=caps,
        workspace_base=text(metadata.get("workspaceBase"), 4096) or None,
    )


@dataclass(frozen=True, slots=True)
class KeyRequest:
    os: str
    replace: bool
    label: str | None


def parse_create_key(value: Any) -> KeyRequest:
    body = check(value if value is not None else {}, schema.CREATE_KEY)
    os_name = body.get("os", "macos")
    if os_name not in C.KEY_OS:
        raise BadRequest(f"os must be one of {', '.join(C.KEY_OS)}")
    label = body.get("label")
    return KeyRequest(
        os=os_name,
        replace=bool(body.get("replace", False)),
        label=display_name(label) if label is not None else None,
    )


@dataclass(frozen=True, slots=True)
class Heartbeat:
    cpu_model: str | None
    memory_bytes: int | None
    agent_version: str | None
    capabilities: tuple[str, ...] | None
    workspace_base: str | None


def parse_heartbeat(value: Any) -> Heartbeat:
    body = check(value if value is not None else {}, {"meta": schema.opt(schema.OBJ)})
    meta = body.get("meta") or {}
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    caps = capabilities(body.get("capabilities"))
    if caps is None:
        caps = capabilities(meta.get("capabilities"))
    if caps is None:
        caps = capabilities(metadata.get("capabilities"))
    memory = meta.get("memoryBytes")
    version = meta.get("agentVersion", metadata.get("agentVersion"))
    return Heartbeat(
        cpu_model=text(meta["cpuModel"]) if isinstance(meta.get("cpuModel"), str) else None,
        memory_bytes=memory if isinstance(memory, int) and memory >= 0 else None,
        agent_version=text(version) if isinstance(version, str) else None,
        capabilities=caps,
        workspace_base=text(metadata.get("workspaceBase"), 4096) or None,
    )


def parse_result(value: Any, max_output: int) -> tuple[str, dict[str, Any]]:
    """The request id and the normalised result (§3.3), each buffer capped."""
    body = check(value, schema.RESULT)
    exit_code = body.get("exitCode")
    duration = body.get("durationMs")
    return body["requestId"], {
        "ok": body.get("ok") is True,
        "exitCode": exit_code
        if isinstance(exit_code, int) and not isinstance(exit_code, bool)
        else None,
        "signal": body["signal"] if isinstance(body.get("signal"), str) else None,
        "stdout": _capped(body.get("stdout"), max_output),
        "stderr": _capped(body.get("stderr"), max_output),
        "durationMs": duration if isinstance(duration, int | float) else 0,
        "truncated": body.get("truncated") is True,
        "timedOut": body.get("timedOut") is True,
        "error": body["error"] if isinstance(body.get("error"), str) else None,
    }


def _capped(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    return value if len(value) <= limit else value[-limit:]


@dataclass(frozen=True, slots=True)
class ChunkBody:
    request_id: str
    seq: int
    stdout: bytes
    stderr: bytes
    heartbeat: bool


def _b64(value: Any, where: str) -> bytes:
    if value in (None, ""):
        return b""
    if not isinstance(value, str):
        raise BadRequest(f"{where} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"{where} is not valid base64") from None


CHUNK_NEEDS: schema.Shape = {
    "requestId": schema.f(schema.STR, needed=True),
    "seq": schema.f(schema.INT, needed=True),
}


def parse_chunk(value: Any) -> ChunkBody:
    """Either chunk shape: §11.2 `{stdout, stderr}` or §11.6.2 `{type, data}`."""
    body = check(value, CHUNK_NEEDS)
    if body["seq"] < 0:
        raise BadRequest("$.seq must be 0 or more")
    stdout = _b64(body.get("stdout"), "$.stdout")
    stderr = _b64(body.get("stderr"), "$.stderr")
    kind = body.get("type")
    heartbeat = False
    if kind is not None:
        if kind not in schema.CHUNK_TYPES:
            raise BadRequest(f"$.type must be one of {', '.join(schema.CHUNK_TYPES)}")
        data = _b64(body.get("data"), "$.data")
        if kind == "stdout":
            stdout += data
        elif kind == "stderr":
            stderr += data
        else:
            heartbeat = True
    return ChunkBody(body["requestId"], body["seq"], stdout, stderr, heartbeat)


def parse_fs_result(value: Any) -> tuple[str, dict[str, Any]]:
    body = check(value, schema.FS_RESULT)
    kept = {name: body[name] for name in schema.FS_RESULT if name in body and name != "requestId"}
    return body["requestId"], kept
