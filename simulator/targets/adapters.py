"""How Tetherbed talks to a hub's client and admin APIs: two small interfaces.

The specs define only the agent⇄platform side. A platform's client API (how a
user's code sends a request to the agent serving a session) and its admin
actions (revoke a session, shut down) are its own, so a target names a class
for each, `MODULE:CLASS`, that Tetherbed imports and drives:

    class MyClients:                      # ClientAdapter
        def __init__(self, hub: HubAccess) -> None: ...
        async def open(self, session: str, user: str) -> SessionClient: ...
        async def close(self) -> None: ...

    class MySessionClient:                # SessionClient
        async def send(self, request_id: str, kind: str, payload: bytes) -> None: ...
        async def receive(self) -> Answer: ...
        async def close(self) -> None: ...

    class MyAdmin:                        # AdminAdapter
        def __init__(self, hub: HubAccess) -> None: ...
        async def revoke(self, session: str, user: str) -> None: ...
        async def shutdown(self) -> None: ...           # NotSupported if it cannot
        async def sessions(self, user: str) -> list[str]: ...
        async def close(self) -> None: ...

`payload` is the request's JSON payload exactly as the spec shows it
(`{"command": "echo hi"}` for EXECUTE_COMMAND); an `Answer` is the response
type, the request id it answers (None for a connection-level error) and its
JSON payload. `receive` raises `ConnectionLost` when the connection is gone;
`open` raises `OpenRefused` when the hub refuses the client. Every answer is
recorded exactly as the adapter returns it, so an adapter must not invent,
merge or drop answers. Tetherbed's own API is the default of both
(`tetherbed.simulator.targets.reference`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tetherbed.simulator.targets.errors import TargetError
from tetherbed.simulator.targets.hub import HubAccess


@dataclass(frozen=True, slots=True)
class Answer:
    kind: str
    request_id: str | None
    payload: bytes


class ConnectionLost(Exception):
    """The client's connection to the hub is gone (outstanding requests: unknown)."""


class OpenRefused(Exception):
    """The hub refused to open a client for this session (`status`: HTTP or code)."""

    def __init__(self, status: int | str, message: str = "") -> None:
        super().__init__(message or f"refused with {status}")
        self.status = status


class NotSupported(Exception):
    """The hub's admin API cannot do this (the step that needs it fails clearly)."""


@runtime_checkable
class SessionClient(Protocol):
    async def send(self, request_id: str, kind: str, payload: bytes) -> None: ...

    async def receive(self) -> Answer: ...

    async def close(self) -> None: ...


@runtime_checkable
class ClientAdapter(Protocol):
    async def open(self, session: str, user: str) -> SessionClient: ...

    async def close(self) -> None: ...


@runtime_checkable
class AdminAdapter(Protocol):
    async def revoke(self, session: str, user: str) -> None: ...

    async def shutdown(self) -> None: ...

    async def sessions(self, user: str) -> list[str]: ...

    async def close(self) -> None: ...


DEFAULT_CLIENT = "tetherbed.simulator.targets.reference:TetherbedClients"
DEFAULT_ADMIN = "tetherbed.simulator.targets.reference:TetherbedAdmin"


def check_reference(spec: str, where: str) -> str:
    """`MODULE:CLASS`, checked for shape only (importing waits until it is used)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name.isidentifier():
        raise TargetError(f"{where}: an adapter is MODULE:CLASS, not {spec!r}")
    return spec


def load_class(spec: str, where: str) -> type[Any]:
    check_reference(spec, where)
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"{where}: cannot import {module_name}: {exc}") from None
    found = getattr(module, name, None)
    if not isinstance(found, type):
        raise TargetError(f"{where}: {module_name} has no class {name}")
    return found


def client_adapter(spec: str, hub: HubAccess) -> ClientAdapter:
    adapter = load_class(spec, "client adapter")(hub)
    if not isinstance(adapter, ClientAdapter):
        raise TargetError(f"client adapter {spec}: needs async open(session, user) and close()")
    return adapter


def admin_adapter(spec: str, hub: HubAccess) -> AdminAdapter:
    adapter = load_class(spec, "admin adapter")(hub)
    if not isinstance(adapter, AdminAdapter):
        raise TargetError(f"admin adapter {spec}: needs async revoke, shutdown, sessions and close")
    return adapter
