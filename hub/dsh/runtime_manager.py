"""§10.3: this hub as a controlled machine of another hub (role "runtime" or "both").

A thin lifecycle and persistence wrapper around the agent's `start_runtime`
(§10.4): it never speaks the wire protocol itself. Its state is
`<state dir>/runtime.json` (§10.2), 0600 and written atomically, because it
holds the token this machine presents to the other hub. `enabled` survives
restarts: a hub that starts with an enabled runtime starts it.

Exceptions never escape into the hub: a failed start is `lastError`.
"""

from __future__ import annotations

import contextlib
import logging
import time
import urllib.parse
from pathlib import Path
from typing import Any

from tetherbed.agent.dsh import config as agent_config
from tetherbed.agent.dsh import enrollment
from tetherbed.agent.dsh.runner import RuntimeHandle, RuntimeOptions, start_runtime
from tetherbed.agent.dsh.transport import TransportError
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.credentials import is_credential

log = logging.getLogger("tetherbed.hub.dsh.runtime")


class RuntimeRefused(Exception):
    """§10.5's errors: status and code for the route to answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


class RuntimeManager:
    def __init__(self, state_dir: Path | None) -> None:
        self.path = state_dir / C.RUNTIME_FILE if state_dir else None
        self._handle: RuntimeHandle | None = None
        self._state: dict[str, Any] | None = self._read()
        self._runtime_status: dict[str, Any] = {}

    def _read(self) -> dict[str, Any] | None:
        if self.path is None or not self.path.exists():
            return None
        try:
            return agent_config.load(self.path)
        except agent_config.ConfigError as exc:
            log.warning("ignoring %s: %s", self.path, exc)
            return None

    def _write(self) -> None:
        if self.path is not None and self._state is not None:
            agent_config.write_private_json(self.path, self._state)

    # --- §10.3 -------------------------------------------------------------

    async def configure(self, server_url: Any, key: Any) -> dict[str, Any]:
        if not isinstance(server_url, str) or not server_url.strip():
            raise RuntimeRefused(400, C.ErrorCode.BAD_REQUEST, "serverUrl is required")
        parts = urllib.parse.urlsplit(server_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RuntimeRefused(400, C.ErrorCode.BAD_REQUEST, "serverUrl must be http(s)://host")
        if not is_credential(key):
            raise RuntimeRefused(400, C.ErrorCode.BAD_REQUEST, "key is not an enrollment key")
        server = server_url.strip().rstrip("/")
        try:
            enrolled = await enrollment.enroll(server, key)
        except enrollment.EnrollRefused as exc:
            status = exc.status if exc.status in (400, 401, 409, 410) else 502
            code = exc.code if status != 502 else C.ErrorCode.HUB_UNREACHABLE
            raise RuntimeRefused(status, code, exc.message) from None
        except (TransportError, ValueError) as exc:
            raise RuntimeRefused(502, C.ErrorCode.HUB_UNREACHABLE, str(exc)) from None
        await self.stop()
        self._state = {
            "version": C.RECORD_VERSION,
            "serverUrl": server,
            "computerId": enrolled.computer_id,
            "token": enrolled.token,
            "name": enrolled.name,
            "enabled": True,
            "enrolledAt": _now_iso(),
            "lastConnectedAt": None,
            "lastError": None,
        }
        self._write()
        self.start()
        return self.status()

    def start(self) -> None:
        state = self._state
        if state is None or not state.get("enabled") or self._handle is not None:
            return
        try:
            options = RuntimeOptions(
                server_url=state["serverUrl"],
                token=state["token"],
                computer_id=state["computerId"],
                name=state.get("name") or "",
                on_state=self._on_state,
                on_rename=self._on_rename,
            )
            self._handle = start_runtime(options)
        except Exception as exc:  # never into the host
            state["lastError"] = f"cannot start: {exc}"
            log.exception("runtime did not start")

    async def stop(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(Exception):
                await handle.stop()
        self._runtime_status = {}

    async def enable(self, enabled: bool) -> dict[str, Any]:
        if self._state is None:
            raise RuntimeRefused(400, C.ErrorCode.BAD_REQUEST, "the runtime is not configured")
        self._state["enabled"] = enabled
        self._write()
        if enabled:
            self.start()
        else:
            await self.stop()
        return self.status()

    async def disconnect(self) -> dict[str, Any]:
        await self.stop()
        self._state = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        return self.status()

    def status(self) -> dict[str, Any]:
        state = self._state or {}
        live = self._handle.status() if self._handle is not None else {}
        if self._handle is not None and self._handle.task.done():
            live = {**live, "connected": False}
        return {
            "configured": self._state is not None,
            "enabled": bool(state.get("enabled")),
            "connected": bool(live.get("connected")),
            "serverUrl": state.get("serverUrl"),
            "computerId": state.get("computerId"),
            "name": live.get("name") or state.get("name"),
            "since": live.get("since"),
            "lastError": live.get("lastError") or state.get("lastError"),
        }

    def _on_state(self, status: dict[str, Any]) -> None:
        if self._state is None:
            return
        if status.get("connected"):
            self._state["lastConnectedAt"] = _now_iso()
            self._state["lastError"] = None
        elif status.get("lastError"):
            self._state["lastError"] = status["lastError"]
        with contextlib.suppress(OSError):
            self._write()

    def _on_rename(self, name: str) -> None:
        if self._state is not None:
            self._state["name"] = name
            with contextlib.suppress(OSError):
                self._write()
