"""Session bindings through ControlOperations, with a fake launcher."""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.audit import key as audit_key
from tetherbed.agent.config import AgentConfig, Limits
from tetherbed.agent.control import fingerprint as fp
from tetherbed.agent.control import grant
from tetherbed.agent.control.bindings import AuditEvent, BindingState
from tetherbed.agent.control.children import ProcessLauncher
from tetherbed.agent.control.controller import ControlOperations
from tetherbed.agent.control.launcher import IDLE_EXIT_CODE, ChildSpec, ExitCallback
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    Ack,
    ActivateSession,
    AttachSession,
    DetachSession,
    DirectoryListRequest,
    DirectoryListResponse,
    Empty,
    MessageType,
    Payload,
    RestoreSession,
    SessionActivated,
    SessionAttached,
    SessionRestored,
)

T = MessageType
KEY = grant.grant_key(b"a" * 32)
MACHINE = "machine-1"


@dataclass
class FakeChild:
    spec: ChildSpec
    on_exit: ExitCallback
    pid: int
    stopped: bool = False

    async def stop(self) -> int | None:
        self.stopped = True
        return -15

    def exit(self, code: int) -> None:
        """The child stops by itself (idle stop, crash)."""
        self.stopped = True
        self.on_exit(code)


@dataclass
class FakeLauncher:
    children: list[FakeChild] = field(default_factory=list)
    fail: bool = False
    stop_all_calls: int = 0

    async def start(self, spec: ChildSpec, on_exit: ExitCallback) -> FakeChild:
        await asyncio.sleep(0)  # a real start yields too
        if self.fail:
            raise OSError("no such executable")
        child = FakeChild(spec, on_exit, pid=1000 + len(self.children))
        self.children.append(child)
        return child

    async def stop_all(self) -> None:
        self.stop_all_calls += 1

    @property
    def running(self) -> list[FakeChild]:
        return [child for child in self.children if not child.stopped]


@dataclass
class World:
    root: Path
    launcher: FakeLauncher
    ops: ControlOperations
    audit: list[tuple[str, dict[str, Any]]]
    config: AgentConfig

    def fresh_ops(self, key: bytes = KEY) -> ControlOperations:
        """A new control agent on the same machine: an agent restart."""
        return make_ops(self.root, self.launcher, self.audit, self.config, key)


def make_ops(
    root: Path,
    launcher: FakeLauncher,
    audit: list[tuple[str, dict[str, Any]]],
    config: AgentConfig,
    key: bytes = KEY,
) -> ControlOperations:
    return ControlOperations(
        config,
        browse_roots=[root],
        grant_key=key,
        clock=ManualClock(),
        launcher=launcher,
        machine_id=MACHINE,
        audit=lambda event, details: audit.append((event, details)),
        offload=False,
    )


@pytest.fixture
def world(tmp_path: Path) -> World:
    root = Path(os.path.realpath(tmp_path)) / "root"
    for i in range(10):
        (root / f"p{i}").mkdir(parents=True)
    config = AgentConfig(
        hub_url="ws://hub",
        token="secret-token",
        root="/control/root/is/unused",
        machine_id="",
        enable_shell=True,
        local_limits=Limits(max_concurrent=2),
    )
    launcher = FakeLauncher()
    audit: list[tuple[str, dict[str, Any]]] = []
    return World(root, launcher, make_ops(root, launcher, audit, config), audit, config)


async def run(ops: ControlOperations, kind: MessageType, payload: Payload) -> Any:
    return (await ops.run(kind, payload))[1]


async def fails(ops: ControlOperations, code: str, kind: MessageType, payload: Payload) -> str:
    with pytest.raises(ProtocolError) as caught:
        await ops.run(kind, payload)
    assert caught.value.code == code
    return caught.value.message


async def browse_to(ops: ControlOperations, name: str) -> tuple[str, str]:
    """(browse_id, directory_ref) of the root's subdirectory `name`."""
    roots: DirectoryListResponse = await run(ops, T.DIRECTORY_LIST_REQUEST, DirectoryListRequest())
    top: DirectoryListResponse = await run(
        ops,
        T.DIRECTORY_LIST_REQUEST,
        DirectoryListRequest(
            browse_id=roots.browse_id, directory_ref=roots.entries[0].directory_ref
        ),
    )
    return roots.browse_id, next(e.directory_ref for e in top.entries if e.name == name)


async def attach(ops: ControlOperations, session_id: str, name: str) -> SessionAttached:
    browse_id, ref = await browse_to(ops, name)
    kind, attached = await ops.run(
        T.ATTACH_SESSION,
        AttachSession(session_id=session_id, browse_id=browse_id, directory_ref=ref),
    )
    assert kind is T.SESSION_ATTACHED
    return attached  # type: ignore[return-value]


async def activate(ops: ControlOperations, session_id: str, revision: int) -> SessionActivated:
    kind, activated = await ops.run(
        T.ACTIVATE_SESSION, ActivateSession(session_id=session_id, revision=revision)
    )
    assert kind is T.SESSION_ACTIVATED
    return activated  # type: ignore[return-value]


async def restore(ops: ControlOperations, session_id: str, root_grant: str) -> SessionRestored:
    kind, restored = await ops.run(
        T.RESTORE_SESSION, RestoreSession(session_id=session_id, root_grant=root_grant)
    )
    assert kind is T.SESSION_RESTORED
    return restored  # type: ignore[return-value]


def events(world: World) -> list[str]:
    return [event for event, _ in world.audit]


# --- the lifecycle --------------------------------------------------------------


async def test_attach_activate_detach(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    project = str(world.root / "p1")
    assert (attached.session_id, attached.allowed_root, attached.revision) == ("s1", project, 1)
    assert attached.fingerprint == fp.fingerprint(project)
    claims = grant.verify(KEY, attached.root_grant, machine_id=MACHINE, session_id="s1")
    assert (claims.allowed_root, claims.fingerprint, claims.revision) == (
        project,
        attached.fingerprint,
        1,
    )
    assert world.launcher.children == []  # attaching starts nothing

    activated = await activate(world.ops, "s1", 1)
    assert (activated.allowed_root, activated.fingerprint, activated.revision) == (
        project,
        attached.fingerprint,
        1,
    )
    [child] = world.launcher.children
    config = child.spec.config
    assert (config.root, config.session_id, config.machine_id) == (project, "s1", MACHINE)
    assert (config.hub_url, config.token, config.enable_shell) == ("ws://hub", "secret-token", True)
    assert config.local_limits == Limits(max_concurrent=2)
    assert config is not world.config and world.config.root == "/control/root/is/unused"
    assert world.config.session_id is None  # the global config is never changed
    assert child.spec.idle_exit_seconds == 600 and config.idle_exit == 600
    assert world.ops.bindings.get("s1").state is BindingState.ACTIVE  # type: ignore[union-attr]

    # Activating again is idempotent: same answer, no second child.
    assert await activate(world.ops, "s1", 1) == activated
    assert len(world.launcher.children) == 1

    kind, ack = await world.ops.run(T.DETACH_SESSION, DetachSession(session_id="s1"))
    assert (kind, ack) == (T.ACK, Ack(ok=True))
    assert child.stopped and world.ops.bindings.get("s1") is None
    await fails(
        world.ops,
        ErrorCode.SESSION_NOT_ATTACHED,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s1", revision=1),
    )
    assert events(world) == [
        AuditEvent.ATTACHED,
        AuditEvent.ACTIVATED,
        AuditEvent.DETACHED,
    ]
    assert world.audit[2][1]["was_active"] is True


async def test_audit_details_never_contain_the_grant(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    await activate(world.ops, "s1", 1)
    world.launcher.children[0].exit(IDLE_EXIT_CODE)
    await restore(world.ops, "s1", attached.root_grant)
    await world.ops.run(T.DETACH_SESSION, DetachSession(session_id="s1"))
    assert len(world.audit) == 5
    for _, details in world.audit:
        assert details["session_id"] == "s1"
        assert all(attached.root_grant not in repr(value) for value in details.values())
        assert "root_grant" not in details


async def test_detach_of_an_unknown_session_is_acked(world: World) -> None:
    kind, ack = await world.ops.run(T.DETACH_SESSION, DetachSession(session_id="never"))
    assert (kind, ack) == (T.ACK, Ack(ok=True))
    assert world.audit == []


# --- ATTACH ---------------------------------------------------------------------


async def test_attach_consumes_the_browse(world: World) -> None:
    browse_id, ref = await browse_to(world.ops, "p1")
    request = AttachSession(session_id="s1", browse_id=browse_id, directory_ref=ref)
    await world.ops.run(T.ATTACH_SESSION, request)
    await fails(world.ops, ErrorCode.DIRECTORY_REFERENCE_INVALID, T.ATTACH_SESSION, request)
    other = AttachSession(session_id="s2", browse_id=browse_id, directory_ref=ref)
    await fails(world.ops, ErrorCode.DIRECTORY_REFERENCE_INVALID, T.ATTACH_SESSION, other)
    await fails(
        world.ops,
        ErrorCode.DIRECTORY_REFERENCE_INVALID,
        T.DIRECTORY_LIST_REQUEST,
        DirectoryListRequest(browse_id=browse_id, directory_ref=ref),
    )


async def test_concurrent_attaches_consume_the_browse_once(tmp_path: Path, world: World) -> None:
    ops = make_ops(world.root, world.launcher, world.audit, world.config)
    ops._offload = True  # exercise the worker-thread path as well
    browse_id, ref = await browse_to(ops, "p1")
    results = await asyncio.gather(
        *(
            ops.run(
                T.ATTACH_SESSION,
                AttachSession(session_id=f"s{i}", browse_id=browse_id, directory_ref=ref),
            )
            for i in range(4)
        ),
        return_exceptions=True,
    )
    ok = [r for r in results if not isinstance(r, BaseException)]
    errors = [r for r in results if isinstance(r, ProtocolError)]
    assert len(ok) == 1 and len(errors) == 3
    assert {e.code for e in errors} == {ErrorCode.DIRECTORY_REFERENCE_INVALID}


async def test_attach_ignores_expected_connection_id(world: World) -> None:
    browse_id, ref = await browse_to(world.ops, "p1")
    request = AttachSession(
        session_id="s1", browse_id=browse_id, directory_ref=ref, expected_connection_id="stale"
    )
    kind, _ = await world.ops.run(T.ATTACH_SESSION, request)
    assert kind is T.SESSION_ATTACHED


async def test_references_die_when_the_control_connection_reconnects(world: World) -> None:
    browse_id, ref = await browse_to(world.ops, "p1")
    world.ops.on_connect()
    request = AttachSession(session_id="s1", browse_id=browse_id, directory_ref=ref)
    await fails(world.ops, ErrorCode.DIRECTORY_REFERENCE_INVALID, T.ATTACH_SESSION, request)


async def test_attach_of_a_directory_replaced_by_a_symlink(world: World) -> None:
    browse_id, ref = await browse_to(world.ops, "p1")
    shutil.rmtree(world.root / "p1")
    (world.root / "p1").symlink_to(world.root / "p2")
    request = AttachSession(session_id="s1", browse_id=browse_id, directory_ref=ref)
    await fails(world.ops, ErrorCode.DIRECTORY_UNAVAILABLE, T.ATTACH_SESSION, request)
    assert world.ops.bindings.get("s1") is None
    # A failed attach leaves the browse usable for another choice.
    _, top = await world.ops.run(
        T.DIRECTORY_LIST_REQUEST,
        DirectoryListRequest(browse_id=browse_id, directory_ref=ref_of_root(world, browse_id)),
    )
    p3 = next(e.directory_ref for e in top.entries if e.name == "p3")  # type: ignore[attr-defined]
    request = AttachSession(session_id="s1", browse_id=browse_id, directory_ref=p3)
    kind, _ = await world.ops.run(T.ATTACH_SESSION, request)
    assert kind is T.SESSION_ATTACHED


def ref_of_root(world: World, browse_id: str) -> str:
    browse = world.ops.browser._browses[browse_id]
    return next(ref for ref, d in browse.refs.items() if d.path == str(world.root))


async def test_reattach_bumps_the_revision(world: World) -> None:
    first = await attach(world.ops, "s1", "p1")
    second = await attach(world.ops, "s1", "p2")
    assert (first.revision, second.revision) == (1, 2)
    assert second.allowed_root == str(world.root / "p2")
    assert world.audit[1][1]["previous_root"] == str(world.root / "p1")
    message = await fails(
        world.ops,
        ErrorCode.SESSION_REVISION_MISMATCH,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s1", revision=1),
    )
    assert "current revision 2" in message
    await activate(world.ops, "s1", 2)
    assert world.launcher.children[0].spec.root == str(world.root / "p2")
    await fails(
        world.ops,
        ErrorCode.SESSION_REVISION_MISMATCH,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s1", revision=3),
    )


async def test_an_active_root_is_immutable(world: World) -> None:
    await attach(world.ops, "s1", "p1")
    await activate(world.ops, "s1", 1)
    browse_id, ref = await browse_to(world.ops, "p2")
    request = AttachSession(session_id="s1", browse_id=browse_id, directory_ref=ref)
    message = await fails(world.ops, ErrorCode.SESSION_ALREADY_ACTIVE, T.ATTACH_SESSION, request)
    assert "detach" in message
    assert world.ops.bindings.get("s1").allowed_root == str(world.root / "p1")  # type: ignore[union-attr]
    await world.ops.run(T.DETACH_SESSION, DetachSession(session_id="s1"))
    attached = await run(world.ops, T.ATTACH_SESSION, request)  # browse was not consumed
    assert (attached.allowed_root, attached.revision) == (str(world.root / "p2"), 1)


# --- ACTIVATE -------------------------------------------------------------------


async def test_activate_without_attach(world: World) -> None:
    await fails(
        world.ops,
        ErrorCode.SESSION_NOT_ATTACHED,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="nobody", revision=1),
    )


async def test_activate_after_the_directory_was_recreated(world: World) -> None:
    await attach(world.ops, "s1", "p1")
    (world.root / "p1").rename(world.root / "p1-old")
    (world.root / "p1").mkdir()
    message = await fails(
        world.ops,
        ErrorCode.DIRECTORY_UNAVAILABLE,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s1", revision=1),
    )
    assert "fingerprint" in message
    shutil.rmtree(world.root / "p1")
    await fails(
        world.ops,
        ErrorCode.DIRECTORY_UNAVAILABLE,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s1", revision=1),
    )
    assert world.launcher.children == []


async def test_at_most_eight_children(world: World) -> None:
    for i in range(9):
        await attach(world.ops, f"s{i}", f"p{i}")
    for i in range(8):
        await activate(world.ops, f"s{i}", 1)
    message = await fails(
        world.ops,
        ErrorCode.SHIM_OVERLOADED,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s8", revision=1),
    )
    assert "8 session children" in message
    assert len(world.launcher.running) == 8
    # An idle stop frees a slot...
    world.launcher.children[0].exit(IDLE_EXIT_CODE)
    await activate(world.ops, "s8", 1)
    # ...and the cap holds for RESTORE too.
    root_grant = world.ops.bindings.get("s0").root_grant  # type: ignore[union-attr]
    await fails(
        world.ops,
        ErrorCode.SHIM_OVERLOADED,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s0", root_grant=root_grant),
    )
    await world.ops.run(T.DETACH_SESSION, DetachSession(session_id="s3"))
    await restore(world.ops, "s0", root_grant)
    assert len(world.launcher.running) == 8
    assert world.ops.bindings.active_count == 8


async def test_a_failed_start_leaves_the_session_startable(world: World) -> None:
    await attach(world.ops, "s1", "p1")
    world.launcher.fail = True
    message = await fails(
        world.ops,
        ErrorCode.INTERNAL_ERROR,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s1", revision=1),
    )
    assert "no such executable" in message
    assert world.ops.bindings.get("s1").state is BindingState.ATTACHED  # type: ignore[union-attr]
    assert world.ops.bindings.active_count == 0
    world.launcher.fail = False
    await activate(world.ops, "s1", 1)


# --- idle stop and RESTORE --------------------------------------------------------


async def test_idle_stop_keeps_the_binding_then_restore_restarts(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    await activate(world.ops, "s1", 1)
    world.launcher.children[0].exit(IDLE_EXIT_CODE)
    binding = world.ops.bindings.get("s1")
    assert binding is not None and binding.state is BindingState.STOPPED
    assert events(world)[-1] == AuditEvent.IDLE_STOPPED
    restored = await restore(world.ops, "s1", attached.root_grant)
    assert (restored.allowed_root, restored.fingerprint, restored.revision) == (
        attached.allowed_root,
        attached.fingerprint,
        1,
    )
    assert restored.root_grant == attached.root_grant
    assert len(world.launcher.running) == 1 and binding.state is BindingState.ACTIVE
    # Restoring an active session with its grant is idempotent.
    assert await restore(world.ops, "s1", attached.root_grant) == restored
    assert len(world.launcher.children) == 2
    # After another idle stop, ACTIVATE with the current revision also restarts.
    world.launcher.children[1].exit(IDLE_EXIT_CODE)
    await activate(world.ops, "s1", 1)
    assert len(world.launcher.running) == 1


async def test_other_exits_stop_the_session_and_are_audited(world: World) -> None:
    await attach(world.ops, "s1", "p1")
    await activate(world.ops, "s1", 1)
    world.launcher.children[0].exit(1)
    binding = world.ops.bindings.get("s1")
    assert binding is not None and binding.state is BindingState.STOPPED
    assert binding.last_exit_code == 1
    assert world.audit[-1] == (AuditEvent.CHILD_EXITED, {**binding.fields(), "exit_code": 1})


async def test_exit_notices_of_replaced_children_are_ignored(world: World) -> None:
    await attach(world.ops, "s1", "p1")
    await activate(world.ops, "s1", 1)
    old = world.launcher.children[0]
    await world.ops.run(T.DETACH_SESSION, DetachSession(session_id="s1"))
    old.on_exit(IDLE_EXIT_CODE)  # late notice from the detached child
    assert world.ops.bindings.get("s1") is None
    await attach(world.ops, "s1", "p2")
    await activate(world.ops, "s1", 1)
    old.on_exit(1)
    assert world.ops.bindings.get("s1").state is BindingState.ACTIVE  # type: ignore[union-attr]
    assert AuditEvent.IDLE_STOPPED not in events(world)


async def test_restore_after_an_agent_restart(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    await attach(world.ops, "s2", "p2")
    second = await attach(world.ops, "s2", "p3")  # revision 2
    await activate(world.ops, "s1", 1)
    await world.ops.close()
    assert world.launcher.running == [] and world.launcher.stop_all_calls == 1

    restarted = world.fresh_ops()
    await fails(
        restarted,
        ErrorCode.SESSION_NOT_ATTACHED,
        T.ACTIVATE_SESSION,
        ActivateSession(session_id="s1", revision=1),
    )
    restored = await restore(restarted, "s1", attached.root_grant)
    assert (restored.allowed_root, restored.revision) == (str(world.root / "p1"), 1)
    assert world.launcher.running[-1].spec.root == str(world.root / "p1")
    assert world.audit[-1][0] == AuditEvent.RESTORED and world.audit[-1][1]["from_grant"] is True
    restored2 = await restore(restarted, "s2", second.root_grant)
    assert restored2.revision == 2
    # Once its child idles out, the restored binding takes a new folder at the
    # grant's revision + 1.
    world.launcher.running[-1].exit(IDLE_EXIT_CODE)
    after = await attach(restarted, "s2", "p4")
    assert after.revision == 3


async def test_restore_needs_the_right_key_machine_and_session(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    other_key = world.fresh_ops(key=grant.grant_key(b"b" * 32))
    await fails(
        other_key,
        ErrorCode.ROOT_GRANT_INVALID,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s1", root_grant=attached.root_grant),
    )
    await fails(
        world.ops,
        ErrorCode.ROOT_GRANT_INVALID,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s2", root_grant=attached.root_grant),
    )
    other_machine = ControlOperations(
        world.config,
        browse_roots=[world.root],
        grant_key=KEY,
        clock=ManualClock(),
        launcher=world.launcher,
        machine_id="machine-2",
        offload=False,
    )
    await fails(
        other_machine,
        ErrorCode.ROOT_GRANT_INVALID,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s1", root_grant=attached.root_grant),
    )
    await fails(
        world.ops,
        ErrorCode.ROOT_GRANT_INVALID,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s1", root_grant=attached.root_grant[:-2]),
    )
    assert world.launcher.children == []


async def test_restore_after_the_directory_was_recreated(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    restarted = world.fresh_ops()
    (world.root / "p1").rename(world.root / "p1-old")
    (world.root / "p1").mkdir()
    message = await fails(
        restarted,
        ErrorCode.ROOT_GRANT_INVALID,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s1", root_grant=attached.root_grant),
    )
    assert "fingerprint" in message
    shutil.rmtree(world.root / "p1")
    (world.root / "p1").symlink_to(world.root / "p1-old")  # even pointing at the original
    message = await fails(
        restarted,
        ErrorCode.ROOT_GRANT_INVALID,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s1", root_grant=attached.root_grant),
    )
    assert "symlink" in message
    assert restarted.bindings.get("s1") is None and world.launcher.children == []


async def test_a_stale_grant_is_a_revision_mismatch(world: World) -> None:
    first = await attach(world.ops, "s1", "p1")
    second = await attach(world.ops, "s1", "p2")
    await fails(
        world.ops,
        ErrorCode.SESSION_REVISION_MISMATCH,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s1", root_grant=first.root_grant),
    )
    restored = await restore(world.ops, "s1", second.root_grant)
    assert restored.revision == 2
    # A conflicting grant at the same revision (an attach made before a
    # restart) is refused too while this binding is in memory.
    restarted = world.fresh_ops()
    await attach(restarted, "s9", "p5")
    conflicting = await attach(world.fresh_ops(), "s9", "p6")
    await fails(
        restarted,
        ErrorCode.SESSION_REVISION_MISMATCH,
        T.RESTORE_SESSION,
        RestoreSession(session_id="s9", root_grant=conflicting.root_grant),
    )


async def test_only_control_requests_are_run(world: World) -> None:
    await fails(world.ops, ExtensionCode.MESSAGE_NOT_ALLOWED, T.PING, Empty())


async def test_constructor_refuses_unsafe_settings(world: World) -> None:
    with pytest.raises(ValueError):
        ControlOperations(
            world.config,
            grant_key=KEY,
            clock=ManualClock(),
            launcher=world.launcher,
            machine_id="",
        )
    with pytest.raises(ValueError):
        ControlOperations(
            world.config,
            grant_key=b"short",
            clock=ManualClock(),
            launcher=world.launcher,
            machine_id=MACHINE,
        )


async def test_grant_key_and_state_dir_from_the_runtime(world: World, tmp_path: Path) -> None:
    """The runtime passes state_dir instead of a key: the grant key is derived
    from the audit key kept there, and children are told the same state dir."""
    state = tmp_path / "state"
    ops = ControlOperations(
        world.config,
        browse_roots=[world.root],
        state_dir=state,
        clock=ManualClock(),
        launcher=world.launcher,
        machine_id=MACHINE,
        offload=False,
    )
    attached = await attach(ops, "s1", "p1")
    key = grant.grant_key(audit_key.load_or_create(state))
    grant.verify(key, attached.root_grant, machine_id=MACHINE, session_id="s1")
    await activate(ops, "s1", 1)
    assert world.launcher.children[0].spec.config.state_dir == str(state)
    assert world.config.state_dir is None
    default = ControlOperations(
        world.config, state_dir=state, clock=ManualClock(), machine_id=MACHINE
    )
    assert isinstance(default.bindings._launcher, ProcessLauncher)


async def test_child_that_idles_out_just_as_it_is_asked_for_is_restarted(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    await activate(world.ops, "s1", 1)
    # The platform restores the session while the child is closing for idleness...
    await restore(world.ops, "s1", attached.root_grant)
    assert len(world.launcher.children) == 1
    # ...and the child's idle exit lands right after: it is started again.
    world.launcher.children[0].exit(IDLE_EXIT_CODE)
    for _ in range(5):
        await asyncio.sleep(0)
    binding = world.ops.bindings.get("s1")
    assert binding is not None and binding.state is BindingState.ACTIVE
    assert len(world.launcher.running) == 1 and len(world.launcher.children) == 2


async def test_an_old_request_does_not_restart_a_child_that_idles_later(world: World) -> None:
    attached = await attach(world.ops, "s1", "p1")
    await activate(world.ops, "s1", 1)
    await restore(world.ops, "s1", attached.root_grant)
    clock = world.ops.bindings._clock
    assert isinstance(clock, ManualClock)
    clock.advance(600.0)
    world.launcher.children[0].exit(IDLE_EXIT_CODE)
    for _ in range(5):
        await asyncio.sleep(0)
    binding = world.ops.bindings.get("s1")
    assert binding is not None and binding.state is BindingState.STOPPED
    assert len(world.launcher.children) == 1
