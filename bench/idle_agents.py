"""The hub's memory per idle agent connection, at thousands of agents.

Starts `tetherbed hub` (or `--hub-command`), reads its resident memory, then
opens `--agents` agent connections from this process (asyncio, `websockets`):
each sends its HELLO, waits for HELLO_ACK and then only answers PINGs — an
idle agent. Once all are served and have stayed idle for `--hold` seconds,
the hub's resident memory is read again (from /proc, the hub process and its
children); the difference over the agent count is the figure. Printed, never
enforced (the project's bound: 25 KiB).

    .venv/bin/python bench/idle_agents.py [--agents 5000] [--hold 5] [--json]

`tetherbed load storm --users N --drop none` measures the same through the
recorder with Locust's agents; this bench needs neither, so it also fits a
busy two-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tetherbed.launch import ManagedProcess, _read_listening_url, create_token, start_hub
from tetherbed.load.cpu_sampler import resident_bytes
from tetherbed.runtime import event_loop
from tetherbed.wire.host import normalize_arch

#: Connections opened at once (the hub's accept queue and this loop both cope).
BATCH = 200


class _Frame(msgspec.Struct):
    type: str = ""
    id: str | None = None


_decode = msgspec.json.Decoder(_Frame).decode


def _hello(machine: str) -> bytes:
    return msgspec.json.encode(
        {
            "type": "HELLO",
            "id": uuid.uuid4().hex,
            "ts": time.time(),
            "version": "1.1",
            "payload": {
                "shim_version": "bench-idle",
                "protocol_version": "1.1",
                "machine_id": machine,
                "platform": "linux",
                "arch": normalize_arch(platform.machine()),
                "capabilities": ["files"],
                "allowed_root": "/idle",
            },
        }
    )


async def _agent(url: str, token: str, n: int, served: asyncio.Event, count: list[int]) -> None:
    conn: ClientConnection = await connect(
        f"{url}/ws/local-executor/idle-{n:05d}",
        additional_headers={"Authorization": f"Bearer {token}"},
        compression=None,
        ping_interval=None,
        proxy=None,
        open_timeout=60,
    )
    await conn.send(_hello(f"idle-m{n:05d}").decode())
    try:
        async for data in conn:
            frame = _decode(data)
            if frame.type == "HELLO_ACK":
                count[0] += 1
                served.set()
            elif frame.type == "PING":
                pong = {"type": "PONG", "id": frame.id, "ts": time.time(), "version": "1.1"}
                await conn.send(msgspec.json.encode({**pong, "payload": {}}).decode())
    except ConnectionClosed:
        count[1] += 1


async def measure(url: str, token: str, pid: int, agents: int, hold: float) -> dict[str, float]:
    await asyncio.sleep(1.0)  # the hub settles after start
    before = resident_bytes(pid) or 0
    count = [0, 0]  # served, closed
    served = asyncio.Event()
    tasks = []
    started = time.monotonic()
    for first in range(0, agents, BATCH):
        for n in range(first, min(first + BATCH, agents)):
            tasks.append(asyncio.ensure_future(_agent(url, token, n, served, count)))
        while count[0] < min(first + BATCH, agents) and time.monotonic() - started < 600:
            served.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(served.wait(), 1.0)
    connected = time.monotonic() - started
    await asyncio.sleep(hold)
    after = resident_bytes(pid) or 0
    result = {
        "agents": agents,
        "served": count[0],
        "closed_meanwhile": count[1],
        "connect_seconds": round(connected, 1),
        "rss_before_mib": before / 2**20,
        "rss_after_mib": after / 2**20,
        "kib_per_agent": (after - before) / agents / 1024,
    }
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=5000)
    parser.add_argument("--hold", type=float, default=5.0, help="idle seconds before measuring")
    parser.add_argument(
        "--hub-command",
        default=None,
        help="start this hub instead ({port} {state}; it must accept tetherbed's tokens "
        "from `tetherbed hub token create --state {state}`)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tetherbed-idle-") as workdir:
        state = Path(workdir) / "state"
        state.mkdir()
        token = create_token(state, "idle", "agent")
        if args.hub_command:
            from tetherbed.simulator.targets.running import free_port

            port = free_port()
            command = [
                part.format(port=port, state=state) for part in shlex.split(args.hub_command)
            ]
            proc = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            hub = ManagedProcess("hub", proc)
            url = _read_listening_url(hub, 30)
        else:
            started = start_hub(state)
            hub, url = started.process, started.url
        try:
            result = event_loop.run(measure(url, token, hub.pid, args.agents, args.hold))
        finally:
            with contextlib.suppress(Exception):
                hub.stop()
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"bench/idle_agents.py: {result['served']}/{args.agents} agents served in "
        f"{result['connect_seconds']:.0f} s ({result['closed_meanwhile']} closed meanwhile); "
        f"hub resident memory {result['rss_before_mib']:.1f} → {result['rss_after_mib']:.1f} MiB"
    )
    verdict = "ok" if result["kib_per_agent"] <= 25 else "over"
    print(
        f"hub memory per idle agent connection: {result['kib_per_agent']:.1f} KiB "
        f"(bound 25 KiB: {verdict}); machine load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
