"""A scenario's dsh client: a user's browser and model-tool calls, recorded.

This is the client leg of a dsh-computers run. It calls the hub the way the
settings page (§4) and a model's tools (§5) do — with the user's client token,
over HTTP — and records each call as an operation of process `client:NAME`:
`invoke`, then `ok` (it happened), `fail` (it did not) or `info` (unknown:
the computer went away with the command running, a timeout, a lost
connection). What it records is what the hub answered, summarised (never a
key or a token: an install command's key is replaced by `<key>`):

| f | ok value |
|---|---|
| `create_key` | `keyDigest`, `serverUrl`, `installUrl`, `command`, `joinServerUrls` |
| `state` | `computers`: `[{id, name, online}]` |
| `computer_exec` | `requestId`, `exitCode`, `ok`, `timedOut`, `truncated`, `stdout`, `stderr`, |
| | their `stdoutDigest`, `stderrDigest`, and `streamed`: `[{stream, size, digest}]`, |
| | the output pieces in the order the hub streamed them |
| `rename_computer`, `delete_computer` | `ok`, `name` |

A fail or info value has `code` (the hub's error code) and `status`. Output
digests are `wiretap.digest.data_digest`, the digest the wire recorder gives
the agent's chunks, so a checker can follow each piece back to the chunk it
came from.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
from collections.abc import Callable
from typing import Any

from tetherbed.agent.dsh.transport import HubHttp, TransportError
from tetherbed.simulator.recorder import Recorder
from tetherbed.simulator.scenario import ClientSpec
from tetherbed.simulator.wiretap.digest import data_digest
from tetherbed.wire.dsh import constants as C

T = C.ToolErrorCode
#: Errors after which the command may have run (or be running): outcome unknown.
UNKNOWN_OUTCOME = frozenset({T.WENT_OFFLINE, T.TIMEOUT, T.ABORTED, "connection-lost"})
#: Text of an answer kept in the history; longer text is kept as its digest.
TEXT_KEPT = 4096
NDJSON = "application/x-ndjson"
#: What an exec call waits beyond its own timeout for the hub's answer.
EXEC_SLACK_S = 30.0
_URL = re.compile(r"https?://[^\s'\"<>`]+")
_KEY = re.compile(re.escape(C.CREDENTIAL_PREFIX) + r"[A-Za-z0-9_-]+")


def redact(text: Any) -> Any:
    """Text with every enrollment key replaced by `<key>`."""
    return _KEY.sub("<key>", text) if isinstance(text, str) else text


def kept(text: Any) -> Any:
    if not isinstance(text, str) or len(text) <= TEXT_KEPT:
        return text
    return {"digest": data_digest(text.encode()), "length": len(text)}


def forwarded_headers(host: str) -> dict[str, str]:
    """Every header §4.2 reads an outside address from, naming `host`."""
    return {
        "X-Forwarded-Host": host,
        "X-Forwarded-Proto": "https",
        "Forwarded": f"proto=https;host={host}",
    }


class DshClient:
    def __init__(
        self, spec: ClientSpec, connect: Callable[[], HubHttp], recorder: Recorder
    ) -> None:
        self.spec = spec
        self.process = f"client:{spec.name}"
        self._connect = connect
        self._recorder = recorder
        self._http: HubHttp | None = None
        #: Request id → tool name, while in flight (the runner drains them).
        self.outstanding: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._numbers = 0

    def _client(self) -> HubHttp:
        if self._http is None:
            self._http = self._connect()
        return self._http

    def next_id(self, prefix: str) -> str:
        self._numbers += 1
        return f"{prefix}-{self._numbers}"

    # --- recording ----------------------------------------------------------------------

    def _invoke(self, f: str, req: str, value: dict[str, Any]) -> None:
        self.outstanding[req] = f
        self._recorder.record(self.process, "invoke", f, value, req=req)

    def _complete(self, req: str, kind: str, value: dict[str, Any]) -> None:
        f = self.outstanding.pop(req, "?")
        self._recorder.record(self.process, kind, f, value, req=req)  # type: ignore[arg-type]

    async def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> tuple[int, bytes] | None:
        """The answer's status and body, or None when the connection failed."""
        data = None if body is None else json.dumps(body).encode()
        extra = {"Accept": "application/json", **(headers or {})}
        if data is not None:
            extra["Content-Type"] = "application/json; charset=utf-8"
        try:
            answer = await self._client().request(
                method, path, data, extra, timeout=timeout, limit=64 * C.MiB
            )
        except TransportError:
            return None
        return answer.status, answer.body

    def _failed(self, req: str, answer: tuple[int, bytes] | None) -> None:
        if answer is None:
            self._complete(req, "info", {"code": "connection-lost", "status": None})
            return
        status, body = answer
        code = _error_code(body)
        kind = "info" if code in UNKNOWN_OUTCOME or status >= 500 else "fail"
        self._complete(req, kind, {"code": code, "status": status})

    # --- the browser API (§4) -------------------------------------------------------------

    async def create_key(
        self,
        req: str,
        *,
        os: str = "linux",
        replace: bool = False,
        label: str | None = None,
        forwarded_host: str | None = None,
    ) -> str | None:
        """POST /keys; the key (kept by the runner, never recorded), or None."""
        body: dict[str, Any] = {"os": os, "replace": replace, "label": label}
        invoked = {"os": os, "replace": replace, "label": label}
        headers = forwarded_headers(forwarded_host) if forwarded_host else None
        if forwarded_host:
            invoked["forwarded_host"] = forwarded_host
        self._invoke("create_key", req, invoked)
        answer = await self._call("POST", C.url(C.Route.KEYS), body, headers=headers)
        value = _json(answer[1]) if answer is not None and answer[0] == 200 else None
        key = value.get("key") if isinstance(value, dict) else None
        if not isinstance(key, str):
            self._failed(req, answer)
            return None
        join = await self._call("GET", f"{C.url(C.Route.JOIN_SH)}?key={key}", headers=headers or {})
        script = join[1].decode("utf-8", "replace") if join is not None else ""
        self._complete(
            req,
            "ok",
            {
                "keyDigest": data_digest(key.encode()),
                "serverUrl": value.get("serverUrl"),
                "installUrl": redact(value.get("installUrl")),
                "command": redact(value.get("command")),
                "joinStatus": join[0] if join is not None else None,
                "joinServerUrls": sorted({redact(u) for u in _URL.findall(script)}),
            },
        )
        return key

    async def state(self, req: str) -> list[dict[str, Any]] | None:
        """GET /state: each computer's id, name and presence (None: no answer)."""
        self._invoke("state", req, {})
        answer = await self._call("GET", C.url(C.Route.STATE))
        value = _json(answer[1]) if answer is not None and answer[0] == 200 else None
        if not isinstance(value, dict) or not isinstance(value.get("computers"), list):
            self._failed(req, answer)
            return None
        rows = [
            {"id": c.get("id"), "name": c.get("name"), "online": c.get("online")}
            for c in value["computers"]
            if isinstance(c, dict)
        ]
        self._complete(req, "ok", {"computers": rows})
        return rows

    async def rename(self, req: str, computer_id: str | None, name: str) -> None:
        self._invoke("rename_computer", req, {"id": computer_id, "name": name})
        answer = await self._call("POST", C.url(C.Route.RENAME), {"id": computer_id, "name": name})
        value = _json(answer[1]) if answer is not None else None
        if answer is None or answer[0] != 200 or not isinstance(value, dict):
            self._failed(req, answer)
            return
        self._complete(req, "ok", {"ok": value.get("ok"), "name": value.get("name")})

    async def delete(self, req: str, computer_id: str | None) -> None:
        self._invoke("delete_computer", req, {"id": computer_id})
        answer = await self._call("POST", C.url(C.Route.DELETE), {"id": computer_id})
        value = _json(answer[1]) if answer is not None else None
        if answer is None or answer[0] != 200 or not isinstance(value, dict):
            self._failed(req, answer)
            return
        self._complete(req, "ok", {"ok": value.get("ok")})

    # --- the model tools (§5) -------------------------------------------------------------

    def exec(
        self,
        req: str,
        computer: str,
        command: str,
        *,
        cwd: str | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """computer_exec, without waiting: its completion is recorded when it comes."""
        args: dict[str, Any] = {"computer": computer, "command": command}
        if cwd is not None:
            args["cwd"] = cwd
        if timeout_ms is not None:
            args["timeoutMs"] = timeout_ms
        invoked = {**args, "commandDigest": data_digest(command.encode())}
        self._invoke("computer_exec", req, invoked)
        wait = (timeout_ms or C.EXEC_TIMEOUT_MS) / 1000 + EXEC_SLACK_S
        task = asyncio.ensure_future(self._exec(req, args, wait))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exec(self, req: str, args: dict[str, Any], wait: float) -> None:
        answer = await self._call(
            "POST",
            "/v1/computers/tools/computer_exec",
            args,
            headers={"Accept": NDJSON},
            timeout=wait,
        )
        if answer is None or answer[0] != 200:
            self._failed(req, answer)
            return
        lines = [_json(line) for line in answer[1].splitlines() if line.strip()]
        streamed: list[dict[str, Any]] = []
        request_id = None
        last: dict[str, Any] | None = None
        for line in lines:
            if not isinstance(line, dict):
                continue
            kind = line.get("type")
            if kind == "started":
                request_id = line.get("requestId")
            elif kind == "output":
                data = _b64(line.get("data"))
                streamed.append(
                    {
                        "stream": line.get("stream"),
                        "size": len(data) if data is not None else None,
                        "digest": data_digest(data) if data is not None else None,
                    }
                )
            elif kind in ("result", "error"):
                last = line
        if last is None:
            self._complete(
                req, "info", {"code": "bad-answer", "status": 200, "requestId": request_id}
            )
            return
        if last.get("type") == "error":
            error = last.get("error") if isinstance(last.get("error"), dict) else {}
            code = error.get("code")
            kind = "info" if code in UNKNOWN_OUTCOME else "fail"
            value = {"code": code, "status": last.get("status"), "requestId": request_id}
            self._complete(req, kind, {**value, "streamed": streamed})
            return
        result = last.get("value") if isinstance(last.get("value"), dict) else {}
        self._complete(req, "ok", _exec_summary(result, request_id, streamed))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
            self._http = None


def _exec_summary(
    result: dict[str, Any], request_id: Any, streamed: list[dict[str, Any]]
) -> dict[str, Any]:
    if result.get("promoted"):
        return {"requestId": request_id, "promoted": True, "jobId": result.get("jobId")}
    stdout, stderr = result.get("stdout"), result.get("stderr")
    return {
        "requestId": request_id,
        "exitCode": result.get("exitCode"),
        "ok": result.get("ok"),
        "timedOut": result.get("timedOut"),
        "truncated": result.get("truncated"),
        "stdout": kept(stdout),
        "stderr": kept(stderr),
        "stdoutDigest": data_digest(stdout.encode()) if isinstance(stdout, str) else None,
        "stderrDigest": data_digest(stderr.encode()) if isinstance(stderr, str) else None,
        "streamed": streamed,
    }


def _json(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


def _b64(text: Any) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _error_code(body: bytes) -> str | None:
    """`{"error": "code"}` (browser API) or `{"error": {"code": ...}}` (client API)."""
    value = _json(body)
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    if isinstance(error, dict):
        error = error.get("code")
    return error if isinstance(error, str) else None
