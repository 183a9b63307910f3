"""The control plane end to end: browse → attach → activate → data → idle stop → restore."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tetherbed.client.admin import HubAdmin
from tetherbed.client.machine import MachineControl
from tetherbed.client.sandbox import HubError, HubSandbox
from tetherbed.launch import start_control_agent, start_hub

pytestmark = pytest.mark.e2e

MACHINE = "workstation-1"


async def _wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("condition not reached")


async def test_browse_attach_activate_idle_stop_restore(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    for name in ("alpha", "beta"):
        (projects / name).mkdir(parents=True)
    (projects / "notes.txt").write_text("a file, not listed")
    state = tmp_path / "agent-state"
    hub = start_hub(tmp_path / "hub", args=["--retry-window", "10"])
    agent_token, client_token = hub.token("dev", "agent"), hub.token("dev", "client")
    daemon = start_control_agent(
        hub.url,
        agent_token,
        [projects],
        state,
        machine_id=MACHINE,
        enable_shell=True,
        args=["--child-idle-exit", "2"],
    )
    try:
        async with HubAdmin(hub.url, client_token) as admin:

            async def present() -> bool:
                return any(m["machine_id"] == MACHINE for m in await admin.machines())

            await _wait_for(present)
            (machine,) = [m for m in await admin.machines() if m["machine_id"] == MACHINE]
            assert machine["connection_id"]

            async def connected(session: str) -> bool:
                return any(
                    s["session_id"] == session and s["connected"] for s in await admin.sessions()
                )

            async with MachineControl.connect(hub.url, MACHINE, client_token) as control:
                roots = await control.browse()
                assert [e.path for e in roots.entries] == [str(projects.resolve())]
                listing = await control.browse(roots.browse_id, roots.entries[0].directory_ref)
                assert sorted(e.name for e in listing.entries) == ["alpha", "beta"]
                alpha = next(e for e in listing.entries if e.name == "alpha")
                attached = await control.attach("chat-1", listing.browse_id, alpha.directory_ref)
                assert attached.allowed_root == str((projects / "alpha").resolve())
                assert attached.revision == 1 and len(attached.fingerprint) == 64
                assert attached.root_grant.startswith("v1.")
                with pytest.raises(HubError) as consumed:  # the browse was consumed
                    await control.attach("chat-2", listing.browse_id, alpha.directory_ref)
                assert consumed.value.code == "DIRECTORY_REFERENCE_INVALID"
                with pytest.raises(HubError) as not_attached:
                    await control.activate("chat-9", 1)
                assert not_attached.value.code == "SESSION_NOT_ATTACHED"
                with pytest.raises(HubError) as stale:
                    await control.activate("chat-1", 7)
                assert stale.value.code == "SESSION_REVISION_MISMATCH"

                await control.activate("chat-1", attached.revision)
                await _wait_for(lambda: connected("chat-1"))
                async with HubSandbox.connect(hub.url, "chat-1", client_token) as sb:
                    await sb.files.write("hello.txt", "from the child")
                    assert (projects / "alpha" / "hello.txt").read_text() == "from the child"
                    with pytest.raises(HubError) as outside:
                        await sb.files.read("../beta")
                    assert outside.value.code == "PATH_OUTSIDE_ALLOWED_ROOT"

                # two idle seconds later the child stops, keeping its binding
                await _wait_for(lambda: _not(connected("chat-1")))
                restored = await control.restore("chat-1", attached.root_grant)
                assert restored.allowed_root == attached.allowed_root
                await _wait_for(lambda: connected("chat-1"))

                tampered = attached.root_grant[:-4] + (
                    "AAAA" if not attached.root_grant.endswith("AAAA") else "BBBB"
                )
                with pytest.raises(HubError) as invalid:
                    await control.restore("chat-1", tampered)
                assert invalid.value.code == "ROOT_GRANT_INVALID"

                # idle again; now a plain data request brings the child back by itself
                await _wait_for(lambda: _not(connected("chat-1")))
                async with HubSandbox.connect(hub.url, "chat-1", client_token) as sb:
                    assert await sb.files.read("hello.txt") == "from the child"

                await control.detach("chat-1")
    finally:
        code = daemon.stop()
        hub.stop()
        print(daemon.log())
        print(hub.process.log())
        assert code == 0

    log_file = state / "audit" / "control.jsonl"
    verify = [
        sys.executable,
        "-m",
        "tetherbed",
        "agent",
        "audit",
        "verify",
        str(log_file),
        "--state-dir",
        str(state),
    ]
    ok = subprocess.run(verify, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("OK:")
    text = log_file.read_text()
    assert "v1." not in text  # grants are never audited
    assert "SESSION_ATTACHED" in text or "session_attached" in text.lower()
    lines = text.splitlines()
    lines[1] = lines[1].replace('"result":"', '"result":"forged-', 1)
    log_file.write_text("\n".join(lines) + "\n")
    broken = subprocess.run(verify, capture_output=True, text=True, check=False)
    assert broken.returncode == 1
    assert "BROKEN" in broken.stdout and ":2" in broken.stdout


async def _not(awaitable) -> bool:
    return not await awaitable
