"""dsh-computers end to end: a real hub process and real `tetherbed agent --transport sse`
processes on loopback, driven through the client SDK's model tools."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tetherbed.client.dsh import ComputerSettings, ComputerToolError, ComputerTools
from tetherbed.launch import (
    HubProcess,
    ManagedProcess,
    dsh_agent_command,
    enroll_dsh_agent,
    start_dsh_agent,
    start_hub,
)

pytestmark = pytest.mark.e2e


@dataclass
class Bed:
    hub: HubProcess
    token: str
    base: Path

    @property
    def url(self) -> str:
        return self.hub.http_url

    def settings(self) -> ComputerSettings:
        return ComputerSettings(self.url, self.token)

    def tools(self) -> ComputerTools:
        return ComputerTools(self.url, self.token, timeout=60)


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    base = tmp_path_factory.mktemp("dsh")
    hub = start_hub(base / "state", args=["--dsh-heartbeat-ms", "2000"])
    try:
        yield Bed(hub, hub.token("alice", "client"), base)
    finally:
        hub.stop()


def _key(bed: Bed) -> str:
    async def create() -> str:
        async with bed.settings() as settings:
            return (await settings.create_key("linux"))["key"]

    return asyncio.run(create())


def _state(bed: Bed) -> dict:
    async def read() -> dict:
        async with bed.settings() as settings:
            return await settings.state()

    return asyncio.run(read())


def _wait_for(predicate, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _computer(bed: Bed, name: str) -> dict | None:
    return next((c for c in _state(bed)["computers"] if c["name"] == name), None)


def _computer_by_id(bed: Bed, computer_id: str) -> dict | None:
    return next((c for c in _state(bed)["computers"] if c["id"] == computer_id), None)


@dataclass
class Agent:
    home: Path
    name: str
    process: ManagedProcess
    workspace: Path


def _agent(bed: Bed, name: str) -> Agent:
    home = bed.base / f"home-{name}"
    workspace = bed.base / f"work-{name}"
    workspace.mkdir()
    out = enroll_dsh_agent(bed.url, _key(bed), home, name=name)
    assert f"this computer is now {name}" in out
    process = start_dsh_agent(home, args=["--workspace", str(workspace)], name=name)
    _wait_for(lambda: (_computer(bed, name) or {}).get("online"), what=f"{name} online")
    return Agent(home, name, process, workspace)


@pytest.fixture(scope="module")
def agent(bed: Bed) -> Iterator[Agent]:
    running = _agent(bed, "e2e-box")
    try:
        yield running
    finally:
        running.process.stop()


def test_exec_streams_output_as_it_runs(bed: Bed, agent: Agent) -> None:
    arrivals: list[tuple[float, bytes]] = []

    async def run() -> tuple[float, object]:
        async with bed.tools() as tools:
            result = await tools.exec(
                agent.name,
                "for i in 1 2 3; do echo line$i; sleep 0.4; done; echo oops >&2; exit 7",
                on_stdout=lambda data: arrivals.append((time.monotonic(), data)),
            )
            return time.monotonic(), result

    done_at, result = asyncio.run(run())
    assert b"".join(d for _, d in arrivals) == b"line1\nline2\nline3\n"
    # the first line came while the command was still running, not with the result
    assert done_at - arrivals[0][0] > 0.6
    value = result.value
    assert (value["exitCode"], value["stdout"], value["stderr"]) == (
        7,
        "line1\nline2\nline3\n",
        "oops\n",
    )
    assert value["ok"] is False and value["computer"]["name"] == agent.name
    assert result.text.startswith("$ for i in 1 2 3") and "exit 7 · " in result.text
    assert "stderr:\noops" in result.text


def test_cancel_kills_the_command_and_its_children(bed: Bed, agent: Agent) -> None:
    pid_file = agent.workspace / "child.pid"

    async def run() -> ComputerToolError:
        async with bed.tools() as tools:
            started: list[str] = []
            task = asyncio.ensure_future(
                tools.exec(
                    agent.name, f"sleep 60 & echo $! > {pid_file}; wait", on_started=started.append
                )
            )
            while not (started and pid_file.exists() and pid_file.read_text().strip()):
                await asyncio.sleep(0.05)
            await tools.cancel(started[0])
            with pytest.raises(ComputerToolError) as failure:
                await task
            return failure.value

    error = asyncio.run(run())
    assert error.code == "aborted"
    child = int(pid_file.read_text())
    _wait_for(lambda: not _alive(child), timeout=5, what="the cancelled command's child to die")


def test_a_caller_that_goes_away_cancels_its_command(bed: Bed, agent: Agent) -> None:
    pid_file = agent.workspace / "abandoned.pid"

    async def run() -> None:
        async with bed.tools() as tools:
            command = f"sleep 60 & echo $! > {pid_file}; echo started; wait"
            async for event in tools.exec_stream(agent.name, command):
                if event.type == "output":
                    break  # leaving the stream closes the connection

    asyncio.run(run())
    child = int(pid_file.read_text())
    _wait_for(lambda: not _alive(child), timeout=5, what="the abandoned command's child to die")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_file_operations(bed: Bed, agent: Agent) -> None:
    target = agent.workspace / "notes" / "todo.txt"

    async def run() -> dict:
        async with bed.tools() as tools:
            names = [t["name"] for t in await tools.tools()]
            assert {"computer_read", "computer_write", "computer_edit"} <= set(names)
            written = await tools.write(
                str(target), "one\ntwo\nthree\n", agent.name, createDirs=True
            )
            assert written.value["created"] is True and written.value["bytes"] == 14
            again = await tools.write(str(target), "one\ntwo\nthree\n", agent.name)
            assert again.value["created"] is False
            edited = await tools.edit(str(target), "two", "TWO", agent.name)
            assert edited.value["replacements"] == 1
            read = await tools.read(str(target), agent.name, offset=1, limit=1)
            assert read.value["text"] == "TWO\n" and read.value["truncated"] is True
            assert read.text == "     2\tTWO\n[truncated: read further with offset]"
            globbed = await tools.glob("**/*.txt", agent.name, cwd=str(agent.workspace))
            assert globbed.value["paths"] == [str(target)]
            grepped = await tools.grep("TW.", agent.name, path=str(agent.workspace))
            assert grepped.value["matches"] == [{"path": str(target), "line": 2, "text": "TWO"}]
            with pytest.raises(ComputerToolError) as relative:
                await tools.read("notes/todo.txt", agent.name)
            with pytest.raises(ComputerToolError) as ambiguous:
                await tools.edit(str(target), "e", "E", agent.name)
            return {"relative": relative.value, "ambiguous": ambiguous.value}

    errors = asyncio.run(run())
    assert target.read_text() == "one\nTWO\nthree\n"
    assert errors["relative"].message == "path must be absolute"
    assert errors["ambiguous"].code == "edit-ambiguous"


def test_a_timeout_promotes_the_command_to_a_background_job(bed: Bed, agent: Agent) -> None:
    async def run() -> dict:
        async with bed.tools() as tools:
            result = await tools.call(
                "computer_exec",
                {
                    "computer": agent.name,
                    "command": "echo start; sleep 1.5; echo done",
                    "timeoutMs": 300,
                },
            )
            assert result.value["promoted"] is True
            job = result.value["jobId"]
            for _ in range(100):
                view = await tools.job_output(job)
                if not view["running"]:
                    return view
                await asyncio.sleep(0.1)
            raise AssertionError("the job did not finish")

    view = asyncio.run(run())
    assert view["output"] == "start\ndone\n" and view["exitCode"] == 0


def test_enroll_keeps_a_saved_connection_unless_replaced(bed: Bed, agent: Agent) -> None:
    command = [
        *dsh_agent_command(agent.home, "enroll", "--server", bed.url, "--key", _key(bed)),
    ]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 1
    assert "already connected to" in refused.stderr and "--replace" in refused.stderr
    status = subprocess.run(
        dsh_agent_command(agent.home, "status"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert status.returncode == 0 and "(redacted)" in status.stdout
    token = json.loads((agent.home / "config.json").read_text())["token"]
    assert token not in status.stdout


def test_rename_reaches_the_agent(bed: Bed, agent: Agent) -> None:
    computer = _computer(bed, agent.name)
    assert computer is not None

    async def rename(name: str) -> None:
        async with bed.settings() as settings:
            await settings.rename(computer["id"], name)

    asyncio.run(rename("E2E Box Renamed"))
    config = agent.home / "config.json"
    _wait_for(
        lambda: json.loads(config.read_text())["name"] == "E2E Box Renamed",
        what="the agent's config to carry the new name",
    )
    asyncio.run(rename(agent.name))
    _wait_for(lambda: json.loads(config.read_text())["name"] == agent.name, what="rename back")


def test_a_killed_agent_is_offline_at_once_and_back_on_restart(bed: Bed) -> None:
    victim = _agent(bed, "victim")
    try:
        victim.process.signal(signal.SIGKILL)
        victim.process.wait(5)
        computer = _wait_for(
            lambda: (c := _computer(bed, "victim")) and not c["online"] and c,
            timeout=3,
            what="offline after kill -9",
        )
        assert computer["bots"]["used"] == 0
        victim.process = start_dsh_agent(victim.home, name="victim")
        _wait_for(lambda: (_computer(bed, "victim") or {}).get("online"), what="back online")
    finally:
        victim.process.stop()


def test_delete_kicks_the_stream_and_the_agent_stops(bed: Bed) -> None:
    doomed = _agent(bed, "doomed")
    try:
        computer = _computer(bed, "doomed")
        assert computer is not None

        async def delete() -> None:
            async with bed.settings() as settings:
                await settings.delete(computer["id"])

        asyncio.run(delete())
        assert doomed.process.wait(10) == 3  # its token is dead: it stops retrying
        assert "refused this computer's token" in doomed.process.log()
        assert _computer(bed, "doomed") is None
    finally:
        doomed.process.stop()


def test_join_sh_installs_and_starts_the_agent(bed: Bed) -> None:
    """The installer, run with `sh` here (the Docker bed runs it in a machine)."""
    key = _key(bed)
    home = bed.base / "joined-home"
    env = {
        **os.environ,
        "HOME": str(bed.base / "joined-user"),
        "DSH_COMPUTERS_HOME": str(home),
        "DSH_COMPUTERS_SERVICE": "nohup",
    }
    (bed.base / "joined-user").mkdir()
    command = f"curl -fsSL '{bed.url}/api/dsh-computers/join.sh?key={key}' | sh"
    done = subprocess.run(
        ["sh", "-c", command], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    pid = None
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "This computer is connected to" in done.stdout
        assert "started in the background with nohup" in done.stdout
        pid = int((home / "agent.pid").read_text())
        assert (home / "agent.pyz").exists() and (home / "config.json").stat().st_mode & 0o077 == 0
        name = json.loads((home / "config.json").read_text())["name"]
        _wait_for(lambda: (_computer(bed, name) or {}).get("online"), what="joined agent online")
        reused = subprocess.run(
            ["sh", "-c", command], env=env, capture_output=True, text=True, timeout=90, check=False
        )
        assert "410" in reused.stderr  # curl -f: the used key's script is refused
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            _wait_for(lambda: not _alive(pid), timeout=10, what="the joined agent to stop")


def test_runtime_mode_makes_one_hub_a_machine_of_another(bed: Bed, tmp_path: Path) -> None:
    """§10: hub B connects itself to hub A with a key from A; A then runs commands on B."""
    other = start_hub(tmp_path / "b-state", args=["--dsh-role", "runtime"])
    try:
        token_b = other.token("bob", "client")
        key = _key(bed)

        async def connect() -> dict:
            async with ComputerSettings(other.http_url, token_b) as b:
                assert (await b.state())["role"] == "runtime"
                status = await b.runtime_connect(bed.url, key)
                assert status["configured"] and status["enabled"]
                for _ in range(100):
                    status = await b.runtime()
                    if status["connected"]:
                        return status
                    await asyncio.sleep(0.1)
                raise AssertionError(f"the runtime did not connect: {status}")

        status = asyncio.run(connect())
        assert status["serverUrl"] == bed.url and status["lastError"] is None
        runtime_file = tmp_path / "b-state" / "runtime.json"
        assert runtime_file.stat().st_mode & 0o077 == 0
        computer_id = status["computerId"]

        async def run_on_b() -> str:
            async with bed.tools() as tools:
                return (await tools.exec(computer_id, "echo from-b")).value["stdout"]

        assert asyncio.run(run_on_b()) == "from-b\n"
        assert (_computer_by_id(bed, computer_id) or {}).get("online")

        async def disconnect() -> dict:
            async with ComputerSettings(other.http_url, token_b) as b:
                return await b.runtime_disconnect()

        assert asyncio.run(disconnect())["configured"] is False
        assert not runtime_file.exists()
        _wait_for(
            lambda: not (_computer_by_id(bed, computer_id) or {}).get("online"), what="B offline"
        )
    finally:
        other.stop()
