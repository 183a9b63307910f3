"""The control connection's operations: the five control-plane requests.

Shaped like the data plane's `Operations` (`run(kind, payload)` returning the
response type and payload, raising ProtocolError), so the runtime drives both
the same way. Requests are serialised: they are rare and human-paced, and one
at a time makes "ATTACH consumes the browse" and the child cap exact.

Decisions where the spec is silent (also in the module docstrings):

- Browse references die on every (re)connect (`on_connect`), on ATTACH (the
  whole browse is consumed, only when the attach succeeds), and five minutes
  after the browse started (not sliding). A reference also names the directory
  object: using it after the folder was replaced is DIRECTORY_UNAVAILABLE.
- The 1,000-entry scan budget is per browse and counts every entry read
  (files included), also when a directory is listed again.
- `truncated` is reported on every page of a listing that the bound cut.
- ACTIVATE of an active session at its current revision, and RESTORE of an
  active session with a matching grant, answer success again (idempotent).
- ACTIVATE re-checks the fingerprint: a replaced directory is
  DIRECTORY_UNAVAILABLE (there is no grant to call invalid). RESTORE reports
  any root problem as ROOT_GRANT_INVALID, and a grant that disagrees with the
  in-memory binding (revision, root or fingerprint) as SESSION_REVISION_MISMATCH.
- The eight-child cap answers SHIM_OVERLOADED with details
  {active_children, max_children}; it is a capacity refusal, not a bad request.
- DETACH of a session with no binding answers ACK: the outcome the platform
  asked for already holds, so a DETACH whose answer was lost can be re-sent.
- DETACH forgets the binding but cannot revoke its grant (the spec leaves
  revocation to OAuth): the same grant can RESTORE the session again.
- Children inherit the control agent's state dir (one audit key per machine).
- The audit hook is best effort (a failing hook is logged) and never sees a
  grant.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tetherbed.agent.audit import key as audit_key
from tetherbed.agent.config import AgentConfig, Limits
from tetherbed.agent.control import grant
from tetherbed.agent.control.bindings import (
    MAX_CHILDREN,
    AuditHook,
    SessionBindings,
    no_audit,
)
from tetherbed.agent.control.browse import Browser, random_token
from tetherbed.agent.control.children import ProcessLauncher
from tetherbed.agent.control.launcher import IDLE_EXIT_SECONDS, Launcher
from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    ActivateSession,
    AttachSession,
    DetachSession,
    DirectoryListRequest,
    MessageType,
    Payload,
    RestoreSession,
)

Reply = tuple[MessageType, Payload]
_T = TypeVar("_T")


class ControlOperations:
    """Browse, attach, activate, restore and detach for one machine."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        browse_roots: Sequence[str | os.PathLike[str]] | None = None,
        grant_key: bytes | None = None,
        clock: Clock,
        launcher: Launcher | None = None,
        machine_id: str,
        state_dir: str | os.PathLike[str] | None = None,
        audit: AuditHook = no_audit,
        offload: bool = True,
        new_token: Callable[[], str] = random_token,
        idle_exit_seconds: float = IDLE_EXIT_SECONDS,
        max_children: int = MAX_CHILDREN,
    ) -> None:
        """`grant_key` is `grant.grant_key(audit_key)`, i.e.
        `derive(audit_key, ROOT_GRANT_LABEL)`; without it the audit key is
        loaded (or created) in `state_dir`. `state_dir` is also handed to the
        children, so their audit logs share the key. `launcher` defaults to
        real child processes; `browse_roots` defaults to the user's home."""
        if not machine_id:
            raise ValueError("grants need a machine id")
        if grant_key is None:
            if state_dir is None:
                raise ValueError("pass grant_key, or state_dir to load the audit key from")
            grant_key = grant.grant_key(audit_key.load_or_create(Path(state_dir)))
        if len(grant_key) < 32:
            raise ValueError("the grant key must be at least 32 bytes")
        if state_dir is not None and config.state_dir is None:
            config = dataclasses.replace(config, state_dir=os.fspath(state_dir))
        self.limits = Limits()  # the runtime narrows this after HELLO_ACK, as for Operations
        self.browser = Browser(browse_roots, clock, new_token=new_token)
        self.bindings = SessionBindings(
            base_config=config,
            machine_id=machine_id,
            grant_key=grant_key,
            clock=clock,
            launcher=launcher if launcher is not None else ProcessLauncher(),
            audit=audit,
            offload=offload,
            idle_exit_seconds=idle_exit_seconds,
            max_children=max_children,
        )
        self._offload = offload
        self._lock = asyncio.Lock()

    def on_connect(self) -> None:
        """Every (re)connect of the control WebSocket kills every browse."""
        self.browser.invalidate_all()

    async def close(self) -> None:
        """Stop every child (shutdown)."""
        await self.bindings.close()

    async def run(self, kind: MessageType, payload: Payload) -> Reply:
        """Perform one control request; raises ProtocolError with the spec's code."""
        async with self._lock:
            if kind is MessageType.DIRECTORY_LIST_REQUEST:
                assert isinstance(payload, DirectoryListRequest)
                listing = await self._blocking(self.browser.list_directory, payload)
                return MessageType.DIRECTORY_LIST_RESPONSE, listing
            if kind is MessageType.ATTACH_SESSION:
                assert isinstance(payload, AttachSession)
                # expected_connection_id is ignored by design (spec): reconnects
                # already invalidate every reference, so stale ones fail closed.
                selection = await self._blocking(
                    self.browser.selected, payload.browse_id, payload.directory_ref
                )
                attached = await self.bindings.attach(payload.session_id, selection)
                self.browser.consume(payload.browse_id)
                return MessageType.SESSION_ATTACHED, attached
            if kind is MessageType.ACTIVATE_SESSION:
                assert isinstance(payload, ActivateSession)
                activated = await self.bindings.activate(payload.session_id, payload.revision)
                return MessageType.SESSION_ACTIVATED, activated
            if kind is MessageType.RESTORE_SESSION:
                assert isinstance(payload, RestoreSession)
                restored = await self.bindings.restore(payload.session_id, payload.root_grant)
                return MessageType.SESSION_RESTORED, restored
            if kind is MessageType.DETACH_SESSION:
                assert isinstance(payload, DetachSession)
                return MessageType.ACK, await self.bindings.detach(payload.session_id)
        raise ProtocolError(
            ExtensionCode.MESSAGE_NOT_ALLOWED, f"{kind} is not accepted on the control connection"
        )

    async def _blocking(self, function: Callable[..., _T], *args: Any) -> _T:
        """File system work runs in a worker thread unless the simulator says not to."""
        if self._offload:
            return await asyncio.to_thread(function, *args)
        return function(*args)
