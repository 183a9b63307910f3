"""Clients of the hub's dsh-computers side: the model tools and the settings API.

    async with ComputerTools(hub_url, client_token) as computers:
        rows = await computers.list()
        result = await computers.exec("desk", "make test", on_stdout=print_bytes)

`ComputerTools` speaks the hub's client API (`/v1/computers/...`, see
docs/hub-api.md): `computer_list`, `computer_exec` (its output streamed as it
arrives), the file tools, background jobs, and cancel. `ComputerSettings`
speaks the browser API of the spec (§4: state, keys, key-status, rename,
delete) with the same client token, which is what the settings page does.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from tetherbed.client.errors import AuthenticationError, HubError

NDJSON = "application/x-ndjson"


class ComputerToolError(HubError):
    """A tool call failed: `code` is the hub's (`computer-offline`, `timeout`,
    `aborted`, `ambiguous-computer`, ...), `message` is written for a model."""


class SettingsError(HubError):
    """A browser-API call failed with the spec's `{error, message}`."""


def _http_base(hub_url: str) -> str:
    base = hub_url.rstrip("/")
    for socket, web in (("ws://", "http://"), ("wss://", "https://")):
        if base.startswith(socket):
            base = web + base[len(socket) :]
    return base


@dataclass(frozen=True, slots=True)
class ToolResult:
    value: dict[str, Any]
    content: list[dict[str, str]]

    @property
    def text(self) -> str:
        return "\n".join(part.get("text", "") for part in self.content)


@dataclass(frozen=True, slots=True)
class ExecEvent:
    """One line of a streamed computer_exec: started, output, result or error."""

    type: str
    request_id: str | None = None
    stream: str | None = None
    data: bytes = b""
    result: ToolResult | None = None
    error: ComputerToolError | None = None


def _tool_error(status: int, body: Any) -> HubError:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ComputerToolError("HTTP_ERROR", f"HTTP {status}", http_status=status)
    code = str(error.get("code", "HTTP_ERROR"))
    message = str(error.get("message", ""))
    if status == 401:
        return AuthenticationError(code, message, http_status=status)
    return ComputerToolError(code, message, details=error.get("details"), http_status=status)


class _Session:
    def __init__(self, hub_url: str, token: str, timeout: float | None) -> None:
        self.base_url = _http_base(hub_url)
        self._headers = {"Authorization": f"Bearer {token}"}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Any:
        self._http = aiohttp.ClientSession(headers=self._headers, timeout=self._timeout)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._http is None:
            raise RuntimeError(f"use {type(self).__name__} as an async context manager")
        return self._http


class ComputerTools(_Session):
    """The model-facing tools (§5, §11) on the hub's client API."""

    def __init__(self, hub_url: str, token: str, *, timeout: float | None = None) -> None:
        super().__init__(hub_url, token, timeout)

    async def tools(self) -> list[dict[str, Any]]:
        """The tools offered to this user now (file tools only with an fs agent)."""
        async with self.http.get(f"{self.base_url}/v1/computers/tools") as response:
            body = await response.json(content_type=None)
            if response.status >= 400:
                raise _tool_error(response.status, body)
            return body["tools"]

    async def prompt(self) -> str:
        """§5.3's system-prompt section ('' with no computers)."""
        async with self.http.get(f"{self.base_url}/v1/computers/prompt") as response:
            body = await response.json(content_type=None)
            if response.status >= 400:
                raise _tool_error(response.status, body)
            return body["text"]

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        url = f"{self.base_url}/v1/computers/tools/{name}"
        async with self.http.post(url, json=arguments or {}) as response:
            body = await response.json(content_type=None)
            if response.status >= 400:
                raise _tool_error(response.status, body)
            return ToolResult(body["value"], body["content"])

    async def list(self) -> list[dict[str, Any]]:
        return (await self.call("computer_list")).value["computers"]

    async def exec_stream(
        self,
        computer: str,
        command: str,
        *,
        cwd: str | None = None,
        timeout_ms: float | None = None,
    ) -> AsyncIterator[ExecEvent]:
        """computer_exec with its output as it arrives; leaving early aborts it."""
        arguments: dict[str, Any] = {"computer": computer, "command": command}
        if cwd is not None:
            arguments["cwd"] = cwd
        if timeout_ms is not None:
            arguments["timeoutMs"] = timeout_ms
        url = f"{self.base_url}/v1/computers/tools/computer_exec"
        async with self.http.post(url, json=arguments, headers={"Accept": NDJSON}) as response:
            if response.status >= 400:
                raise _tool_error(response.status, await response.json(content_type=None))
            async for raw in response.content:
                if not raw.strip():
                    continue
                line = json.loads(raw)
                kind = line.get("type")
                if kind == "started":
                    yield ExecEvent("started", request_id=line.get("requestId"))
                elif kind == "output":
                    yield ExecEvent(
                        "output", stream=line.get("stream"), data=base64.b64decode(line["data"])
                    )
                elif kind == "result":
                    yield ExecEvent("result", result=ToolResult(line["value"], line["content"]))
                elif kind == "error":
                    error = _tool_error(int(line.get("status", 500)), line)
                    assert isinstance(error, ComputerToolError)
                    yield ExecEvent("error", error=error)

    async def exec(
        self,
        computer: str,
        command: str,
        *,
        cwd: str | None = None,
        timeout_ms: float | None = None,
        on_stdout: Callable[[bytes], None] | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
        on_started: Callable[[str], None] | None = None,
    ) -> ToolResult:
        """Run a command; output callbacks get bytes as they arrive; raises on failure."""
        async for event in self.exec_stream(computer, command, cwd=cwd, timeout_ms=timeout_ms):
            if event.type == "started" and on_started is not None and event.request_id:
                on_started(event.request_id)
            elif event.type == "output":
                callback = on_stdout if event.stream == "stdout" else on_stderr
                if callback is not None:
                    callback(event.data)
            elif event.type == "result" and event.result is not None:
                return event.result
            elif event.type == "error" and event.error is not None:
                raise event.error
        raise ComputerToolError("UNEXPECTED_RESPONSE", "the hub ended the stream without a result")

    async def cancel(self, request_id: str) -> None:
        """Send `cancel` to the agent; the waiting exec ends with code `aborted`."""
        url = f"{self.base_url}/v1/computers/executions/{request_id}/cancel"
        async with self.http.post(url) as response:
            if response.status >= 400:
                raise _tool_error(response.status, await response.json(content_type=None))

    async def run_in_background(self, computer: str, command: str, **kw: Any) -> str:
        args = {"computer": computer, "command": command, "run_in_background": True, **kw}
        return (await self.call("computer_exec", args)).value["jobId"]

    async def job_output(self, job_id: str, since: int = 0) -> dict[str, Any]:
        return (await self.call("job_output", {"jobId": job_id, "since": since})).value

    async def job_kill(self, job_id: str) -> dict[str, Any]:
        return (await self.call("job_kill", {"jobId": job_id})).value

    async def read(self, path: str, computer: str | None = None, **kw: Any) -> ToolResult:
        return await self.call("computer_read", _with_computer({"path": path, **kw}, computer))

    async def write(
        self, path: str, content: str, computer: str | None = None, **kw: Any
    ) -> ToolResult:
        args = _with_computer({"path": path, "content": content, **kw}, computer)
        return await self.call("computer_write", args)

    async def edit(
        self, path: str, old: str, new: str, computer: str | None = None, **kw: Any
    ) -> ToolResult:
        args = _with_computer({"path": path, "old": old, "new": new, **kw}, computer)
        return await self.call("computer_edit", args)

    async def glob(self, pattern: str, computer: str | None = None, **kw: Any) -> ToolResult:
        return await self.call(
            "computer_glob", _with_computer({"pattern": pattern, **kw}, computer)
        )

    async def grep(self, pattern: str, computer: str | None = None, **kw: Any) -> ToolResult:
        return await self.call(
            "computer_grep", _with_computer({"pattern": pattern, **kw}, computer)
        )


def _with_computer(args: dict[str, Any], computer: str | None) -> dict[str, Any]:
    return {**args, "computer": computer} if computer is not None else args


class ComputerSettings(_Session):
    """The spec's browser API (§4) with a client token: what the settings page calls."""

    def __init__(self, hub_url: str, token: str, *, timeout: float | None = 30) -> None:
        super().__init__(hub_url, token, timeout)

    async def _call(self, method: str, route: str, body: Any = None) -> dict[str, Any]:
        url = f"{self.base_url}/api/dsh-computers/{route}"
        async with self.http.request(method, url, json=body) as response:
            value = await response.json(content_type=None)
            if response.status >= 400:
                code = value.get("error", "HTTP_ERROR") if isinstance(value, dict) else "HTTP_ERROR"
                message = value.get("message", "") if isinstance(value, dict) else ""
                kind = AuthenticationError if response.status == 401 else SettingsError
                raise kind(str(code), str(message), http_status=response.status)
            return value

    async def state(self) -> dict[str, Any]:
        return await self._call("GET", "state")

    async def health(self) -> dict[str, Any]:
        return await self._call("GET", "health")

    async def create_key(
        self, os: str = "linux", *, replace: bool = False, label: str | None = None
    ) -> dict[str, Any]:
        return await self._call("POST", "keys", {"os": os, "replace": replace, "label": label})

    async def key_status(self, key: str) -> dict[str, Any]:
        return await self._call("GET", f"key-status?key={key}")

    async def rename(self, computer_id: str, name: str) -> dict[str, Any]:
        return await self._call("POST", "rename", {"id": computer_id, "name": name})

    async def delete(self, computer_id: str) -> dict[str, Any]:
        return await self._call("POST", "delete", {"id": computer_id})

    # §10.5: this hub as a machine of another hub (role runtime or both).

    async def runtime(self) -> dict[str, Any]:
        return await self._call("GET", "runtime")

    async def runtime_connect(self, server_url: str, key: str) -> dict[str, Any]:
        return await self._call("POST", "runtime/connect", {"serverUrl": server_url, "key": key})

    async def runtime_enable(self, enabled: bool) -> dict[str, Any]:
        return await self._call("POST", "runtime/enable", {"enabled": enabled})

    async def runtime_disconnect(self) -> dict[str, Any]:
        return await self._call("POST", "runtime/disconnect", {})


__all__ = [
    "ComputerSettings",
    "ComputerToolError",
    "ComputerTools",
    "ExecEvent",
    "SettingsError",
    "ToolResult",
]
