"""The dsh hub adapter: how the suite reaches what the spec leaves to the host.

The spec dispatches commands only through model tools (§5, `computer_exec`)
and puts its browser routes behind a host request gate it does not define
(§4). A hub under test therefore comes with a small class (`--adapter
MODULE:CLASS`, docs/conformance.md) that the suite builds with a `HubAccess`:

    class MyDshHub:
        def __init__(self, hub: HubAccess) -> None: ...
        def browser_headers(self) -> dict[str, str]: ...   # what the gate admits
        async def exec(self, computer: str, command: str, *, timeout_ms: int | None = None,
                       cwd: str | None = None) -> ExecOutcome: ...
        async def close(self) -> None: ...

`exec` is one `computer_exec` call: its value or its error, and the output
the caller saw streamed while it ran, in the order it was shown (empty when
the hub streams nothing to callers). Return what the hub answered; never
reorder or merge output. `TetherbedDshHub` is the adapter of Tetherbed's own
hub (its client API, `/v1/computers/tools/computer_exec` with NDJSON output).
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from tetherbed.simulator.targets import HubAccess

#: The longest a single computer_exec call may take before the adapter gives up.
CALL_TIMEOUT = 60.0


@dataclass(slots=True)
class ExecOutcome:
    #: The tool's value (§5.2), or None when the call failed.
    value: dict[str, Any] | None = None
    #: The error message the model would read, or None.
    error: str | None = None
    #: A code a program can branch on, if the hub gives one.
    code: str | None = None
    #: (stream, bytes) as the caller saw them while the command ran.
    output: list[tuple[str, bytes]] = field(default_factory=list)

    @property
    def promoted(self) -> bool:
        """§11.6.3: the call came back as a background job."""
        value = self.value or {}
        return bool(value.get("promoted") or (value.get("jobId") and "exitCode" not in value))

    def describe(self) -> str:
        if self.error is not None:
            return f"error {self.code or ''}: {self.error[:200]}"
        return f"value {json.dumps(self.value)[:300]}"


class DshHubAdapter(Protocol):
    def browser_headers(self) -> dict[str, str]: ...

    async def exec(
        self, computer: str, command: str, *, timeout_ms: int | None = None, cwd: str | None = None
    ) -> ExecOutcome: ...

    async def close(self) -> None: ...


class TetherbedDshHub:
    """Tetherbed's hub: the browser gate is a client bearer token; tools on /v1/computers."""

    def __init__(self, hub: HubAccess, user: str = "alice") -> None:
        self.hub = hub
        self.token = hub.tokens.get(user, "client")
        self._session: aiohttp.ClientSession | None = None

    def browser_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def exec(
        self, computer: str, command: str, *, timeout_ms: int | None = None, cwd: str | None = None
    ) -> ExecOutcome:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True, ssl=self.hub.ssl)
            )
        args: dict[str, Any] = {"computer": computer, "command": command}
        if timeout_ms is not None:
            args["timeoutMs"] = timeout_ms
        if cwd is not None:
            args["cwd"] = cwd
        headers = {**self.browser_headers(), "Accept": "application/x-ndjson"}
        outcome = ExecOutcome()
        url = f"{self.hub.http_url}/v1/computers/tools/computer_exec"
        async with asyncio.timeout(CALL_TIMEOUT):
            async with self._session.post(url, json=args, headers=headers) as response:
                if "ndjson" not in response.headers.get("Content-Type", ""):
                    return _settle(outcome, await response.json(content_type=None))
                async for raw in response.content:
                    line = raw.strip()
                    if not line:
                        continue
                    item = json.loads(line)
                    if item.get("type") == "output":
                        data = base64.b64decode(item.get("data") or "")
                        outcome.output.append((str(item.get("stream")), data))
                    elif item.get("type") == "result":
                        outcome.value = item.get("value")
                    elif item.get("type") == "error":
                        _settle(outcome, item)
        return outcome

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _settle(outcome: ExecOutcome, body: Any) -> ExecOutcome:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        outcome.error = str(body["error"].get("message"))
        outcome.code = body["error"].get("code")
    elif isinstance(body, dict) and "value" in body:
        outcome.value = body["value"]
    else:
        outcome.error = f"an answer the adapter does not understand: {str(body)[:200]}"
    return outcome
