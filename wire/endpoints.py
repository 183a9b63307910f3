"""The WebSocket paths an agent dials, as the local-executor spec names them.

`/ws/local-executor` is the machine's control connection; `/ws/local-executor/
{session_id}` serves one session (the data connection). Anything that reads a
recorded upgrade (the wire recorder, checkers) tells the two apart from here.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

CONTROL_PATH = "/ws/local-executor"


def data_path(session_id: str) -> str:
    return f"{CONTROL_PATH}/{session_id}"


def session_of_path(path: str) -> str | None:
    """The session a data-connection path names; None for control or other paths."""
    route = urlsplit(path).path.rstrip("/")
    prefix = CONTROL_PATH + "/"
    if not route.startswith(prefix):
        return None
    rest = route[len(prefix) :]
    return unquote(rest) if rest and "/" not in rest else None


def is_agent_path(path: str) -> bool:
    """A control or data connection of an agent (not a client API path)."""
    route = urlsplit(path).path.rstrip("/")
    return route == CONTROL_PATH or session_of_path(path) is not None
