"""Numbering users across every Locust process: which session is whose.

Locust spreads users over workers as it likes (fixed counts included), so a
user cannot derive its place from its worker. Instead each user claims a slot
from the master over Locust's custom messages: slot n of role "agent" serves
session n, slot n of role "client" addresses session n modulo the sessions.
On a single process (no master) the local runner answers its own claims.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from gevent.event import AsyncResult
from locust.env import Environment
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

CLAIM = "tetherbed_claim"
GRANT = "tetherbed_grant"
#: How long a user waits for the master's answer.
CLAIM_SECONDS = 60.0

_waiting: dict[str, AsyncResult] = {}
_counters: Counter[str] = Counter()


def install(environment: Environment) -> None:
    """Register the message handlers this process's runner needs (on `init`)."""
    runner = environment.runner
    if isinstance(runner, MasterRunner | LocalRunner):
        runner.register_message(CLAIM, _on_claim)
    if isinstance(runner, WorkerRunner | LocalRunner):
        runner.register_message(GRANT, _on_grant)


def claim(environment: Environment, role: str) -> int:
    """The next free slot of `role`, from the master."""
    token = uuid.uuid4().hex
    waiter: AsyncResult = AsyncResult()
    _waiting[token] = waiter
    runner = environment.runner
    assert runner is not None
    runner.send_message(CLAIM, {"role": role, "token": token})
    try:
        return int(waiter.get(timeout=CLAIM_SECONDS))
    finally:
        _waiting.pop(token, None)


def _on_claim(environment: Environment, msg: Any, **_: Any) -> None:
    role = msg.data["role"]
    index = _counters[role]
    _counters[role] += 1
    runner = environment.runner
    assert runner is not None
    runner.send_message(GRANT, {"token": msg.data["token"], "index": index}, client_id=msg.node_id)


def _on_grant(environment: Environment, msg: Any, **_: Any) -> None:
    waiter = _waiting.get(msg.data["token"])
    if waiter is not None:
        waiter.set(msg.data["index"])
