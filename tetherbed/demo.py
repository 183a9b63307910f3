"""`tetherbed demo`: the shipped scenarios on the sim and process backends.

`tetherbed demo` runs every scenario in `scenarios/` first on the sim backend
(virtual time: seconds of wall time for minutes of scenario) and then on the
process backend (real hub and agent processes behind fault proxies), and
prints both tables. `tetherbed demo --tour` instead starts a hub and an agent
on loopback and tours files and shell through the Python client.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from tetherbed.client.sandbox import CommandExitException, HubError, HubSandbox
from tetherbed.launch import start_agent, start_hub

SESSION = "demo-session"


def _say(step: str, detail: str = "") -> None:
    print(f"  {step:<38} {detail}".rstrip(), flush=True)


async def _tour(hub_url: str, client_token: str, root: Path) -> None:
    async with HubSandbox.connect(hub_url, SESSION, client_token, request_timeout=30) as sandbox:
        info = await sandbox.files.write("notes/hello.txt", "hello from the hub\r\nsecond line\n")
        _say("files.write notes/hello.txt", f"-> {info.path}")
        await sandbox.files.write("notes/data.bin", bytes(range(256)))
        _say("files.write notes/data.bin", "256 raw bytes, sent as base64")
        entries = await sandbox.files.list("notes")
        _say("files.list notes", ", ".join(f"{e.name} ({e.size} B)" for e in entries))
        text = await sandbox.files.read("notes/hello.txt")
        _say("files.read notes/hello.txt", repr(text) + "  (CRLF kept as on disk)")
        data = await sandbox.files.read("notes/data.bin", format="bytes")
        _say(
            "files.read notes/data.bin",
            f"{len(data)} bytes, identical: {data == bytes(range(256))}",
        )
        started = time.perf_counter()
        result = await sandbox.commands.run('ls notes && echo "user=$USER" && pwd')
        elapsed = (time.perf_counter() - started) * 1000
        _say("commands.run ls; echo; pwd", f"exit {result.exit_code} in {elapsed:.1f} ms")
        for line in result.stdout.splitlines():
            _say("", f"| {line}")
        try:
            await sandbox.commands.run("exit 3")
        except CommandExitException as exc:
            _say("commands.run 'exit 3'", f"raises CommandExitException, exit {exc.exit_code}")
        try:
            await sandbox.files.read("/etc/passwd")
        except HubError as exc:
            _say("files.read /etc/passwd", f"refused: {exc.code}")
        try:
            await sandbox.files.read("../../etc/passwd")
        except HubError as exc:
            _say("files.read ../../etc/passwd", f"refused: {exc.code}")
        await sandbox.files.rename("notes/hello.txt", "notes/renamed.txt")
        _say(
            "files.rename hello -> renamed",
            f"exists now: {await sandbox.files.exists('notes/renamed.txt')}",
        )
        await sandbox.files.remove("notes")
        left = sorted(await asyncio.to_thread(os.listdir, root))
        _say("files.remove notes", f"left on disk: {left}")


def main(argv: list[str] | None = None) -> int:
    if argv and "--tour" in argv:
        return tour()
    from tetherbed.simulator.cli import main as run

    scenarios = _scenarios_folder()
    codes = []
    for backend in ("sim", "process"):
        print(f"\n=== the shipped scenarios on the {backend} backend ===", flush=True)
        codes.append(run([str(scenarios), "--backend", backend, "--report", f"reports/{backend}"]))
    return max(codes)


def _scenarios_folder() -> Path:
    here = Path("scenarios")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[1] / "scenarios"


def tour() -> int:
    with tempfile.TemporaryDirectory(prefix="tetherbed-demo-") as tmp:
        base = Path(tmp)
        root = base / "workspace"
        root.mkdir()
        print("Tetherbed demo: a hub and an agent on loopback, driven by the Python client")
        hub = start_hub(base / "hub-state")
        agent = None
        try:
            agent_token = hub.token("demo", "agent")
            client_token = hub.token("demo", "client")
            _say("hub", f"{hub.url} (pid {hub.process.pid})")
            agent = start_agent(hub.url, agent_token, root, SESSION, enable_shell=True)
            hub.wait_connected(client_token, SESSION)
            _say("agent", f"session {SESSION}, root {root} (pid {agent.pid})")
            asyncio.run(_tour(hub.url, client_token, root))
        finally:
            if agent is not None:
                _say("agent stopped", f"exit code {agent.stop()}")
            _say("hub stopped", f"exit code {hub.stop()}")
    return 0
