"""`tetherbed demo`: the shipped scenarios on sim, one of them on real processes.

`tetherbed demo` (what `make demo` runs) takes about a minute: every shipped
scenario on the sim backend (virtual time: seconds of wall time for minutes of
scenario), then one of them on the process backend (a real hub and agents
behind fault proxies), and ends by saying where that run's timeline is, how
to open it, and how long the demo took. `--full` runs every scenario on the
process backend too (a few minutes). `tetherbed demo --tour` instead starts a
hub and an agent on loopback and tours files and shell through the Python
client.
"""

from __future__ import annotations

import argparse
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


#: The scenario the short demo runs on real processes: two laptops claim one
#: session and the second is refused with 4427, in about 20 s.
PROCESS_SCENARIO = "different_machine_split_brain.yaml"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tetherbed demo", description=__doc__)
    parser.add_argument("--tour", action="store_true", help="tour a hub and an agent instead")
    parser.add_argument(
        "--full", action="store_true", help="every scenario on the process backend too"
    )
    parser.add_argument(
        "--report", type=Path, default=Path("reports") / "demo", help="report folder"
    )
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.tour:
        return tour()
    from tetherbed.simulator.cli import main as run
    from tetherbed.simulator.scenario import shipped_scenarios

    started = time.monotonic()
    shipped = shipped_scenarios()
    process = shipped if args.full else shipped / PROCESS_SCENARIO
    stages = [
        ("sim", shipped, "every shipped scenario on the sim backend (virtual time)"),
        ("process", process, "on real processes behind fault proxies"),
    ]
    codes, took = [], []
    for backend, target, what in stages:
        print(f"\n=== {what}: {target.name if target.is_file() else target} ===", flush=True)
        begun = time.monotonic()
        report = args.report / backend
        level = ["--log-level", args.log_level] if args.log_level else []
        code = run([str(target), "--backend", backend, "--report", str(report), *level])
        codes.append(code)
        took.append(f"{backend} {time.monotonic() - begun:.1f} s")
        if code >= 128:  # stopped by a signal: the run said so
            return code
    timeline = _a_timeline(args.report / "process")
    print()
    if timeline is not None:
        print(f"timeline of the process run: {timeline}")
        print(f"  open it in a browser: {timeline.resolve().as_uri()}")
        print(f"  (or: xdg-open {timeline})")
    wall = time.monotonic() - started
    print(f"demo: {wall:.1f} s of wall time ({', '.join(took)})", flush=True)
    return max(codes)


def _a_timeline(report: Path) -> Path | None:
    found = sorted(report.glob("*/timeline.html"))
    return found[0] if found else None


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
