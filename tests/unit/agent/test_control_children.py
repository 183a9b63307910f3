"""The real launcher: child command lines, and real processes standing in for agents."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.config import AgentConfig, Limits
from tetherbed.agent.control import grant
from tetherbed.agent.control.bindings import AuditEvent, BindingState
from tetherbed.agent.control.children import (
    TOKEN_ENV,
    ProcessLauncher,
    child_argv,
    child_env,
    default_command,
)
from tetherbed.agent.control.controller import ControlOperations
from tetherbed.agent.control.launcher import ChildSpec
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.messages import (
    ActivateSession,
    AttachSession,
    DetachSession,
    DirectoryListRequest,
    MessageType,
    RestoreSession,
)

T = MessageType
TOKEN = "tok-3f9a-secret"


def spec(root: str = "/work/proj", session_id: str = "-sess-1", **config: Any) -> ChildSpec:
    fields: dict[str, Any] = {
        "hub_url": "ws://127.0.0.1:8765",
        "token": TOKEN,
        "root": root,
        "session_id": session_id,
        "machine_id": "m-1",
        "enable_shell": False,
        "local_limits": Limits(
            max_file_size_bytes=1024, command_timeout_seconds=2.5, max_concurrent=3
        ),
        **config,
    }
    return ChildSpec(config=AgentConfig(**fields))


def python(code: str) -> list[str]:
    """A stand-in for `python -m tetherbed`: the agent arguments follow it."""
    return [sys.executable, "-c", code]


async def wait_for(predicate: Any) -> None:
    """Poll a condition outside our control (a process, a file) for up to 10 s."""
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached within 10 s")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "root"
    (root / "proj").mkdir(parents=True)
    return root


def test_child_command_line_carries_config_but_never_the_token() -> None:
    argv = child_argv(spec(), default_command())
    assert argv == [
        sys.executable,
        "-m",
        "tetherbed",
        "agent",
        "--hub=ws://127.0.0.1:8765",
        "--session-id=-sess-1",  # the = form: a leading "-" is not an option
        "--root=/work/proj",
        "--machine-id=m-1",
        "--max-concurrent=3",
        "--max-file-size=1024",
        "--command-timeout=2.5",
        "--idle-exit=600",
    ]
    assert all(TOKEN not in arg for arg in argv)
    assert "--enable-shell" in child_argv(spec(enable_shell=True), ["x"])
    assert "--state-dir=/var/state" in child_argv(spec(state_dir="/var/state"), ["x"])
    env = child_env(spec(), {"PATH": "/bin", TOKEN_ENV: "parent-token"})
    assert env == {"PATH": "/bin", TOKEN_ENV: TOKEN}


async def test_spawn_stop_and_exit_codes(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    record = (
        "import json, os, sys, time; "
        f"json.dump({{'argv': sys.argv, 'token': os.environ.get({TOKEN_ENV!r})}}, "
        f"open({str(report)!r}, 'w')); "
        "time.sleep(30)"
    )
    launcher = ProcessLauncher(command=python(record), stop_timeout=5)
    exits: list[int] = []
    child = await launcher.start(spec(), exits.append)
    assert child.pid is not None and child.returncode is None
    await wait_for(report.exists)
    await wait_for(lambda: report.stat().st_size > 0)
    seen = json.loads(report.read_text())
    assert seen["token"] == TOKEN
    assert "--session-id=-sess-1" in seen["argv"] and "--idle-exit=600" in seen["argv"]
    assert all(TOKEN not in arg for arg in seen["argv"])
    assert launcher.running == 1

    assert await child.stop() == -signal.SIGTERM
    assert exits == []  # a stop we asked for is not reported as an exit
    assert await child.stop() == -signal.SIGTERM  # idempotent
    assert launcher.running == 0

    idle = await launcher.start(spec(), exits.append)
    assert idle.pid != child.pid
    await launcher.stop_all()

    quitter = ProcessLauncher(command=python("import sys; sys.exit(5)"))
    await quitter.start(spec(), exits.append)
    await wait_for(lambda: exits == [5])


async def test_sigkill_after_the_stop_timeout(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"open({str(ready)!r}, 'w').close(); time.sleep(30)"
    )
    launcher = ProcessLauncher(command=python(stubborn), stop_timeout=0.3)
    child = await launcher.start(spec(), lambda code: None)
    await wait_for(ready.exists)
    assert await child.stop() == -signal.SIGKILL


async def test_children_can_log_to_a_file_per_session(tmp_path: Path) -> None:
    exits: list[int] = []
    launcher = ProcessLauncher(
        command=python("import sys; print('to stdout'); print('to stderr', file=sys.stderr)"),
        log_dir=tmp_path / "logs",
    )
    await launcher.start(spec(session_id="../../evil"), exits.append)
    await wait_for(lambda: exits == [0])
    [log_file] = (tmp_path / "logs").iterdir()
    assert log_file.name.startswith("session-.._.._evil-")
    assert os.stat(log_file).st_mode & 0o777 == 0o600
    text = log_file.read_text()
    assert "to stdout" in text and "to stderr" in text


async def test_control_with_real_children_idle_stop_and_restore(root: Path, tmp_path: Path) -> None:
    """Bindings + ProcessLauncher: a child that idles out (exit 5) keeps its
    binding, RESTORE starts a new process, DETACH and close() stop them."""
    marker = tmp_path / "quick-exit"
    # Exits 5 at once while the marker exists, else runs until stopped.
    stand_in = python(
        f"import os, sys, time; sys.exit(5) if os.path.exists({str(marker)!r}) else time.sleep(30)"
    )
    audit: list[tuple[str, dict[str, Any]]] = []
    ops = ControlOperations(
        AgentConfig(hub_url="ws://hub", token=TOKEN, root="/unused"),
        browse_roots=[root],
        grant_key=grant.grant_key(b"c" * 32),
        clock=ManualClock(),
        launcher=ProcessLauncher(command=stand_in, stop_timeout=5),
        machine_id="m-1",
        audit=lambda event, details: audit.append((event, details)),
    )
    _, roots = await ops.run(T.DIRECTORY_LIST_REQUEST, DirectoryListRequest())
    bid = roots.browse_id  # type: ignore[attr-defined]
    _, top = await ops.run(
        T.DIRECTORY_LIST_REQUEST,
        DirectoryListRequest(browse_id=bid, directory_ref=roots.entries[0].directory_ref),  # type: ignore[attr-defined]
    )
    ref = top.entries[0].directory_ref  # type: ignore[attr-defined]
    _, attached = await ops.run(
        T.ATTACH_SESSION, AttachSession(session_id="s1", browse_id=bid, directory_ref=ref)
    )

    marker.touch()
    await ops.run(T.ACTIVATE_SESSION, ActivateSession(session_id="s1", revision=1))
    binding = ops.bindings.get("s1")
    assert binding is not None
    await wait_for(lambda: binding.state is BindingState.STOPPED)
    assert binding.last_exit_code == 5
    assert audit[-1][0] == AuditEvent.IDLE_STOPPED

    marker.unlink()
    grant_text = attached.root_grant  # type: ignore[attr-defined]
    await ops.run(T.RESTORE_SESSION, RestoreSession(session_id="s1", root_grant=grant_text))
    assert binding.state is BindingState.ACTIVE and binding.child is not None
    pid = binding.child.pid
    assert pid is not None
    os.kill(pid, 0)  # alive
    await ops.run(T.DETACH_SESSION, DetachSession(session_id="s1"))
    assert audit[-1][0] == AuditEvent.DETACHED and audit[-1][1]["exit_code"] == -signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)

    # DETACH forgets the binding but cannot revoke the grant (OAuth does that):
    # it restores again, and shutdown stops that child.
    await ops.run(T.RESTORE_SESSION, RestoreSession(session_id="s1", root_grant=grant_text))
    restored = ops.bindings.get("s1")
    assert restored is not None and restored.child is not None
    pid = restored.child.pid
    assert pid is not None
    await ops.close()
    assert restored.state is BindingState.STOPPED
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
