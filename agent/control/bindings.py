"""The per-machine state machine of session bindings.

A binding ties one platform session to one directory object (canonical path +
fingerprint) at a revision. States::

    (none) --attach--> ATTACHED --activate/restore--> ACTIVE
    ACTIVE --child exits (5 = idle stop, or anything else)--> STOPPED
    STOPPED --activate (current revision) / restore--> ACTIVE
    any --detach--> (none)
    ATTACHED/STOPPED --attach--> ATTACHED at revision + 1

Bindings live only in memory. The root grant returned by ATTACH carries the
binding, so RESTORE_SESSION rebuilds it after an agent restart.

Choices where the spec is silent (see the controller docstring for the list):
ACTIVATE of an already active session with its current revision answers
SESSION_ACTIVATED again (idempotent; SESSION_ALREADY_ACTIVE is kept for what
the spec names it for, replacing an active root), and so does RESTORE of an
active session with a matching grant. The eight-child cap answers
SHIM_OVERLOADED. DETACH of an unknown session is a plain ACK.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tetherbed.agent.config import AgentConfig
from tetherbed.agent.control import fingerprint as fp
from tetherbed.agent.control.browse import Selection
from tetherbed.agent.control.grant import GrantClaims, sign, verify
from tetherbed.agent.control.launcher import (
    IDLE_EXIT_CODE,
    IDLE_EXIT_SECONDS,
    ChildHandle,
    ChildSpec,
    Launcher,
)
from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, SessionActivated, SessionAttached, SessionRestored

log = logging.getLogger(__name__)

#: Spec: the "eight-child safety cap".
MAX_CHILDREN = 8
#: An idle child that stops within this long of being asked for is restarted.
RESTART_GRACE_SECONDS = 5.0
#: Inactive bindings beyond this are forgotten, oldest first; their grants
#: still restore them, so forgetting loses nothing the platform cannot replay.
MAX_BINDINGS = 1024

AuditHook = Callable[[str, dict[str, Any]], None]


class AuditEvent(StrEnum):
    """Names passed to the audit hook. Details never include the grant."""

    ATTACHED = "SESSION_ATTACHED"
    ACTIVATED = "SESSION_ACTIVATED"
    RESTORED = "SESSION_RESTORED"
    DETACHED = "SESSION_DETACHED"
    IDLE_STOPPED = "SESSION_IDLE_STOPPED"
    CHILD_EXITED = "SESSION_CHILD_EXITED"


class BindingState(StrEnum):
    ATTACHED = "attached"  # bound; no child started yet
    ACTIVE = "active"  # child starting or running
    STOPPED = "stopped"  # child stopped (idle or exited); binding kept


@dataclass(slots=True)
class Binding:
    session_id: str
    allowed_root: str
    fingerprint: str
    revision: int
    root_grant: str
    state: BindingState = BindingState.ATTACHED
    child: ChildHandle | None = None
    generation: int = 0
    last_exit_code: int | None = None
    #: When an ACTIVATE/RESTORE last found the child already running. A child
    #: that stops for idleness right then was asked for again: restart it.
    wanted_at: float | None = None

    def fields(self) -> dict[str, Any]:
        """The wire binding fields (SESSION_ACTIVATED and friends)."""
        return {
            "session_id": self.session_id,
            "allowed_root": self.allowed_root,
            "fingerprint": self.fingerprint,
            "revision": self.revision,
        }


def no_audit(event: str, details: dict[str, Any]) -> None:
    """The default audit hook: records nothing."""


class SessionBindings:
    """Attach, activate, restore and detach sessions of one machine.

    Every transition holds one lock, so a child start or stop (awaited) can
    never interleave with another transition of any session.
    """

    def __init__(
        self,
        *,
        base_config: AgentConfig,
        machine_id: str,
        grant_key: bytes,
        clock: Clock,
        launcher: Launcher,
        audit: AuditHook = no_audit,
        offload: bool = True,
        idle_exit_seconds: float = IDLE_EXIT_SECONDS,
        max_children: int = MAX_CHILDREN,
    ) -> None:
        self._base_config = base_config
        self._machine_id = machine_id
        self._key = grant_key
        self._clock = clock
        self._launcher = launcher
        self._audit_hook = audit
        self._offload = offload
        self._idle_exit_seconds = idle_exit_seconds
        self._max_children = max_children
        self._bindings: dict[str, Binding] = {}
        self._lock = asyncio.Lock()
        self._restarts: set[asyncio.Task[None]] = set()
        self._generation = 0

    # --- queries -------------------------------------------------------------

    def get(self, session_id: str) -> Binding | None:
        return self._bindings.get(session_id)

    @property
    def active_count(self) -> int:
        return sum(1 for b in self._bindings.values() if b.state is BindingState.ACTIVE)

    # --- transitions ---------------------------------------------------------

    async def attach(self, session_id: str, selection: Selection) -> SessionAttached:
        """Bind `session_id` to a strictly re-resolved directory at revision + 1."""
        async with self._lock:
            previous = self._bindings.get(session_id)
            if previous is not None and previous.state is BindingState.ACTIVE:
                raise ProtocolError(
                    ErrorCode.SESSION_ALREADY_ACTIVE,
                    f"session {session_id} is active with root {previous.allowed_root}; "
                    "an active session's root is immutable, detach it first",
                )
            revision = previous.revision + 1 if previous is not None else 1
            claims = GrantClaims(
                machine_id=self._machine_id,
                session_id=session_id,
                revision=revision,
                allowed_root=selection.path,
                fingerprint=selection.fingerprint,
                issued_at=self._clock.time(),
            )
            binding = Binding(
                session_id=session_id,
                allowed_root=selection.path,
                fingerprint=selection.fingerprint,
                revision=revision,
                root_grant=sign(self._key, claims),
            )
            self._store(binding)
            self._audit(
                AuditEvent.ATTACHED,
                {
                    **binding.fields(),
                    "previous_root": previous.allowed_root if previous else None,
                    "previous_revision": previous.revision if previous else None,
                },
            )
            return SessionAttached(**binding.fields(), root_grant=binding.root_grant)

    async def activate(self, session_id: str, revision: int) -> SessionActivated:
        """Start the session's child at its current revision (idempotent when active)."""
        async with self._lock:
            binding = self._bindings.get(session_id)
            if binding is None:
                raise ProtocolError(
                    ErrorCode.SESSION_NOT_ATTACHED,
                    f"session {session_id} has no folder attached on this machine "
                    "(attach one, or restore it with its root grant)",
                )
            if revision != binding.revision:
                raise ProtocolError(
                    ErrorCode.SESSION_REVISION_MISMATCH,
                    f"revision {revision} is not session {session_id}'s current "
                    f"revision {binding.revision}",
                    details={"current_revision": binding.revision},
                )
            if binding.state is BindingState.ACTIVE:
                binding.wanted_at = self._clock.monotonic()
                return SessionActivated(**binding.fields())
            current = await self._fingerprint(binding.allowed_root)
            if current != binding.fingerprint:
                raise ProtocolError(
                    ErrorCode.DIRECTORY_UNAVAILABLE,
                    f"directory {binding.allowed_root} was replaced since it was attached "
                    "(its fingerprint changed); attach it again",
                )
            await self._start(binding)
            self._audit(AuditEvent.ACTIVATED, {**binding.fields(), "pid": _pid(binding)})
            return SessionActivated(**binding.fields())

    async def restore(self, session_id: str, root_grant: str) -> SessionRestored:
        """Rebuild (if needed) the binding a grant carries and start its child."""
        claims = verify(self._key, root_grant, machine_id=self._machine_id, session_id=session_id)
        async with self._lock:
            binding = self._bindings.get(session_id)
            if binding is not None and (
                binding.revision != claims.revision
                or binding.allowed_root != claims.allowed_root
                or binding.fingerprint != claims.fingerprint
            ):
                raise ProtocolError(
                    ErrorCode.SESSION_REVISION_MISMATCH,
                    f"grant revision {claims.revision} conflicts with session {session_id}'s "
                    f"current binding (revision {binding.revision})",
                    details={"current_revision": binding.revision},
                )
            try:
                current = await self._fingerprint(claims.allowed_root)
            except ProtocolError as exc:
                raise ProtocolError(
                    ErrorCode.ROOT_GRANT_INVALID, f"grant root is unusable: {exc.message}"
                ) from None
            if current != claims.fingerprint:
                raise ProtocolError(
                    ErrorCode.ROOT_GRANT_INVALID,
                    f"directory {claims.allowed_root} is not the one the grant was issued for "
                    "(its fingerprint changed)",
                )
            created = binding is None
            if binding is None:
                binding = Binding(
                    session_id=session_id,
                    allowed_root=claims.allowed_root,
                    fingerprint=claims.fingerprint,
                    revision=claims.revision,
                    root_grant=root_grant,
                )
                self._store(binding)
            if binding.state is not BindingState.ACTIVE:
                try:
                    await self._start(binding)
                except BaseException:
                    if created:
                        self._bindings.pop(session_id, None)
                    raise
            else:
                binding.wanted_at = self._clock.monotonic()
            self._audit(
                AuditEvent.RESTORED,
                {**binding.fields(), "pid": _pid(binding), "from_grant": created},
            )
            return SessionRestored(**binding.fields(), root_grant=binding.root_grant)

    async def detach(self, session_id: str) -> Ack:
        """Stop the child and forget the binding. Unknown sessions: ACK (nothing to do)."""
        async with self._lock:
            binding = self._bindings.pop(session_id, None)
            if binding is None:
                return Ack(ok=True)
            exit_code = None
            was_active = binding.state is BindingState.ACTIVE
            if binding.child is not None:
                child, binding.child = binding.child, None
                exit_code = await child.stop()
            self._audit(
                AuditEvent.DETACHED,
                {**binding.fields(), "was_active": was_active, "exit_code": exit_code},
            )
            return Ack(ok=True)

    async def close(self) -> None:
        """Stop every child (agent shutdown); bindings stay, as grants restore them."""
        for task in list(self._restarts):
            task.cancel()
        async with self._lock:
            running = [b for b in self._bindings.values() if b.child is not None]
            for binding in running:
                binding.state = BindingState.STOPPED
            children = [b.child for b in running if b.child is not None]
            for binding in running:
                binding.child = None
            await asyncio.gather(*(child.stop() for child in children), return_exceptions=True)
            await self._launcher.stop_all()

    # --- internals -----------------------------------------------------------

    async def _start(self, binding: Binding) -> None:
        active = self.active_count
        if active >= self._max_children:
            raise ProtocolError(
                ErrorCode.SHIM_OVERLOADED,
                f"{active} session children are running, the most this machine runs at "
                "once; detach a session (or wait for an idle one to stop) and retry",
                details={"active_children": active, "max_children": self._max_children},
            )
        self._generation += 1
        generation = self._generation
        before = binding.state
        binding.state, binding.generation, binding.child = BindingState.ACTIVE, generation, None
        session_id = binding.session_id
        spec = ChildSpec(
            config=self._child_config(binding), idle_exit_seconds=self._idle_exit_seconds
        )
        try:
            child = await self._launcher.start(
                spec, lambda code: self._exited(session_id, generation, code)
            )
        except BaseException as exc:
            if binding.generation == generation:
                binding.state = before
            if not isinstance(exc, Exception):
                raise  # cancelled: nothing started that we know of
            log.exception("could not start the child of session %s", session_id)
            raise ProtocolError(
                ErrorCode.INTERNAL_ERROR,
                f"could not start the child of session {session_id}: {type(exc).__name__}: {exc}",
            ) from exc
        if binding.generation == generation and binding.state is BindingState.ACTIVE:
            binding.child = child
        else:  # it exited before start() returned; nothing to keep
            with contextlib.suppress(Exception):
                await child.stop()

    def _exited(self, session_id: str, generation: int, code: int) -> None:
        """A child stopped on its own. Stale notices (detached, replaced) are ignored."""
        binding = self._bindings.get(session_id)
        if binding is None or binding.generation != generation:
            return
        if binding.state is not BindingState.ACTIVE:
            return
        binding.state, binding.child, binding.last_exit_code = BindingState.STOPPED, None, code
        wanted = binding.wanted_at
        if (
            code == IDLE_EXIT_CODE
            and wanted is not None
            and self._clock.monotonic() - wanted <= RESTART_GRACE_SECONDS
        ):
            # The idle child was already closing its connection when the
            # platform asked for the session: serve that request.
            log.info("session %s child stopped as it was asked for; restarting", session_id)
            task = asyncio.ensure_future(self._restart(session_id, generation))
            self._restarts.add(task)
            task.add_done_callback(self._restarts.discard)
            return
        if code == IDLE_EXIT_CODE:
            log.info("session %s child stopped after being idle; binding kept", session_id)
            self._audit(AuditEvent.IDLE_STOPPED, binding.fields())
        else:
            log.warning("session %s child exited with code %d; binding kept", session_id, code)
            self._audit(AuditEvent.CHILD_EXITED, {**binding.fields(), "exit_code": code})

    async def _restart(self, session_id: str, generation: int) -> None:
        async with self._lock:
            binding = self._bindings.get(session_id)
            if binding is None or binding.generation != generation:
                return
            if binding.state is BindingState.STOPPED:
                binding.wanted_at = None
                try:
                    await self._start(binding)
                except Exception:
                    log.exception("could not restart the child of session %s", session_id)

    def _child_config(self, binding: Binding) -> AgentConfig:
        return dataclasses.replace(
            copy.deepcopy(self._base_config),
            root=binding.allowed_root,
            session_id=binding.session_id,
            machine_id=self._machine_id,
            idle_exit=self._idle_exit_seconds,
        )

    async def _fingerprint(self, path: str) -> str:
        if self._offload:
            return await asyncio.to_thread(fp.fingerprint, path)
        return fp.fingerprint(path)

    def _store(self, binding: Binding) -> None:
        self._bindings.pop(binding.session_id, None)  # re-insert: newest last
        if len(self._bindings) >= MAX_BINDINGS:
            for session_id, old in self._bindings.items():
                if old.state is not BindingState.ACTIVE:
                    del self._bindings[session_id]
                    break
        self._bindings[binding.session_id] = binding

    def _audit(self, event: AuditEvent, details: dict[str, Any]) -> None:
        """Audit is best effort here: a failing hook is logged, never turned into
        a protocol failure after the transition already happened."""
        try:
            self._audit_hook(str(event), details)
        except Exception:
            log.exception("audit hook failed for %s", event)


def _pid(binding: Binding) -> int | None:
    return binding.child.pid if binding.child is not None else None
