"""An agent killed with SIGKILL in the middle of FILE_WRITE leaves nothing in the user's tree.

A real agent gets large FILE_WRITEs; the test watches the process's open
descriptors and kills it (-9) while it holds a file inside the root open for
writing. A new agent is started on the same root and state directory. After it
is connected, the directory holds only what was there before plus the files
whose writes completed (whole, never partial): no temporary, named or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.platform_server import PlatformServer
from tetherbed.launch import ManagedProcess, start_agent

pytestmark = pytest.mark.e2e

WRITES = 8
SIZE = 4 << 20  # 4 MiB each, so the write and its fsync take a while
KILLS = 3


def _writing_inside(pid: int, root: Path) -> bool:
    """Whether the process holds a non-directory inside `root` open right now."""
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith(f"{root}/") and not os.path.isdir(target):
                    return True
    return False


def _start(server: PlatformServer, root: Path, state: Path) -> ManagedProcess:
    return start_agent(
        server.url,
        "token",
        root,
        "crash",
        machine_id="crasher",
        args=["--state-dir", str(state), "--display=", "--max-concurrent", "8"],
    )


async def test_sigkill_mid_write_leaves_no_temporary(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path)) / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "keep.txt").write_text("keep")
    state = tmp_path / "state"
    content = "z" * SIZE
    server = PlatformServer(max_concurrent=8, max_file_size=16 << 20)
    async with server.running():
        for round_ in range(KILLS):
            agent = _start(server, root, state)
            try:
                link = await server.accept()
                writes: list[asyncio.Future] = []
                batch = 0
                deadline = time.monotonic() + 60
                while not _writing_inside(agent.pid, root):
                    assert time.monotonic() < deadline, "the agent never started writing"
                    if all(write.done() for write in writes):
                        # On a busy machine a batch can finish between two
                        # looks: send another, until one is caught mid-write.
                        writes += [
                            asyncio.ensure_future(
                                link.call(
                                    "FILE_WRITE",
                                    {
                                        "path": f"{root}/data/f{round_}-{batch}-{i}.txt",
                                        "content": content,
                                    },
                                )
                            )
                            for i in range(WRITES)
                        ]
                        batch += 1
                    await asyncio.sleep(0.0005)
                os.kill(agent.pid, signal.SIGKILL)
                agent.wait(10)
                await asyncio.gather(*writes, return_exceptions=True)
            finally:
                agent.stop()
        agent = _start(server, root, state)  # starts, cleans up, connects
        try:
            link = await server.accept()
            listing = await link.call("FILE_LIST", {"path": f"{root}/data", "include_hidden": True})
        finally:
            agent.stop()
    names = sorted(os.listdir(root / "data"))
    assert sorted(e["name"] for e in listing["payload"]["entries"]) == names
    leftovers = [n for n in names if n != "keep.txt" and not n.startswith("f")]
    assert not leftovers, f"temporaries left in the user's tree: {leftovers}"
    for name in names:
        if name != "keep.txt":  # a write either happened whole or not at all
            assert (root / "data" / name).stat().st_size == SIZE, name
