"""Reading answers in cases: the expected type, the expected error code, quoted when not.

A departure names what came back, so the one-line reason in the table is
enough to see what the target did.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.agent.platform import AgentConnection
from tetherbed.simulator.conformance.case import Departure
from tetherbed.simulator.conformance.recorded_socket import Frame


def quote(answer: Frame) -> str:
    text = answer.describe()
    if answer.type == "ERROR":
        message = str(answer.payload.get("message", ""))[:160]
        if message:
            text += f": {message}"
    return text


def require_type(answer: Frame, kind: str, what: str) -> dict[str, Any]:
    if answer.type != kind:
        raise Departure(f"{what}: expected {kind}, got {quote(answer)}")
    return answer.payload


def require_error(answer: Frame, codes: str | Iterable[str], what: str) -> str:
    """The ERROR's code, which must be one of `codes` (any code when `codes` is empty)."""
    wanted = {codes} if isinstance(codes, str) else set(codes)
    if answer.type != "ERROR":
        expected = " or ".join(sorted(wanted)) if wanted else "an ERROR"
        raise Departure(f"{what}: expected {expected}, got {quote(answer)}")
    code = answer.payload.get("code")
    if wanted and code not in wanted:
        raise Departure(f"{what}: expected {' or '.join(sorted(wanted))}, got {quote(answer)}")
    return str(code)


async def read_text(conn: AgentConnection, path: Path | str, **fields: Any) -> Frame:
    payload = {"path": str(path), "encoding": "utf-8", "format": "text", "offset": 0,
               "length": None}  # fmt: skip
    payload.update(fields)
    return await conn.request("FILE_READ", payload)


async def read_bytes(conn: AgentConnection, path: Path | str, **fields: Any) -> Frame:
    payload = {"path": str(path), "encoding": "base64", "format": "bytes", "offset": 0,
               "length": None}  # fmt: skip
    payload.update(fields)
    return await conn.request("FILE_READ", payload)


def decoded(answer: Frame, what: str) -> bytes:
    payload = require_type(answer, "FILE_CONTENTS", what)
    try:
        return base64.b64decode(str(payload.get("content", "")), validate=True)
    except ValueError:
        raise Departure(f"{what}: content is not valid base64") from None


async def write_text(
    conn: AgentConnection, path: Path | str, content: str, *, create_parents: bool = False
) -> Frame:
    return await conn.request(
        "FILE_WRITE",
        {"path": str(path), "content": content, "encoding": "utf-8",
         "create_parents": create_parents},
    )  # fmt: skip


async def stat(conn: AgentConnection, path: Path | str, follow: bool = True) -> Frame:
    return await conn.request("FILE_STAT", {"path": str(path), "follow_symlinks": follow})


async def command(conn: AgentConnection, **payload: Any) -> Frame:
    timeout = float(payload.get("timeout_seconds") or 10)
    return await conn.request("EXECUTE_COMMAND", payload, timeout=timeout + 15)
