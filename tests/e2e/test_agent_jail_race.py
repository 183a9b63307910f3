"""A directory inside the root swapped for a symlink to outside, while a real agent works in it.

A racer process swaps `root/work` (a directory) and `root/swap` (a symlink to a
directory outside the root) with renameat2(RENAME_EXCHANGE), as fast as it can,
while a platform sends the agent EXECUTE_COMMAND with `cwd: root/work` and file
operations on `root/work/...`. Judged from the wire and the disk:

- every command that ran ran inside the root (`pwd -P` says where);
- every file operation got a typed answer: a spec code with, for
  INTERNAL_ERROR, the precise `details.reason_code` (never an untyped failure);
- nothing outside the root changed, and the agent logged no traceback.

`TETHERBED_RACE_ROUNDS` raises the number of rounds (default 300 commands and
300 file operations, a few seconds); run it with e.g. 5000 to soak.
"""

from __future__ import annotations

import asyncio
import collections
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.platform_server import AgentLink, PlatformServer
from tetherbed.launch import start_agent

pytestmark = pytest.mark.e2e

ROUNDS = int(os.environ.get("TETHERBED_RACE_ROUNDS", "300"))
IN_FLIGHT = 6

RACER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
swaps = 0
while True:
    if libc.renameat2(-100, a, -100, b, 2) != 0:  # RENAME_EXCHANGE
        raise OSError(ctypes.get_errno(), "renameat2")
    swaps += 1
"""


def _typed(answer: dict[str, Any]) -> bool:
    """A success, or an ERROR a caller can act on (never an unexplained one)."""
    if answer["type"] != "ERROR":
        return True
    payload = answer["payload"]
    if payload["code"] != "INTERNAL_ERROR":
        return True
    return "reason_code" in payload.get("details", {})


async def _rounds(link: AgentLink, root: Path, count: int, make: Any) -> list[tuple[Any, dict]]:
    """`count` requests from `make(i)`, `IN_FLIGHT` at a time; (request, answer) pairs."""
    results: list[tuple[Any, dict]] = []
    queue = collections.deque(range(count))

    async def worker() -> None:
        while queue:
            i = queue.popleft()
            kind, payload = make(i)
            results.append(((kind, payload), await link.call(kind, payload)))

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return results


def _examples(results: list[tuple[Any, dict]]) -> dict[tuple[str, str, str | None], str]:
    """One message per kind of error seen."""
    examples: dict[tuple[str, str, str | None], str] = {}
    for (kind, _), answer in results:
        if answer["type"] == "ERROR":
            payload = answer["payload"]
            key = (kind, payload["code"], payload.get("details", {}).get("reason_code"))
            examples.setdefault(key, payload["message"])
    return examples


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    base = Path(os.path.realpath(tmp_path))
    root, outside = base / "root", base / "outside"
    (root / "work").mkdir(parents=True)
    (root / "work" / "f.txt").write_text("inside\n")
    outside.mkdir()
    (outside / "f.txt").write_text("outside: must never change\n")
    (root / "swap").symlink_to(outside)
    return root, outside


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


async def test_swapped_directory_never_lets_work_out_of_the_root(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    root, outside = tree
    before = _snapshot(outside)
    work = root / "work"
    server = PlatformServer(max_concurrent=8)
    async with server.running():
        agent = start_agent(
            server.url,
            "token",
            root,
            "race",
            enable_shell=True,
            machine_id="racer",
            args=["--max-concurrent", "8", "--state-dir", str(tmp_path / "state"), "--display="],
        )
        racer = None
        try:
            link = await server.accept()
            racer = subprocess.Popen(
                [sys.executable, "-c", RACER, str(work), str(root / "swap")],
                stdin=subprocess.DEVNULL,
            )
            commands = await _rounds(
                link,
                root,
                ROUNDS,
                lambda i: ("EXECUTE_COMMAND", {"argv": ["pwd", "-P"], "cwd": str(work)}),
            )
            ops = [
                lambda i: ("FILE_WRITE", {"path": f"{work}/w{i}", "content": "x" * 64}),
                lambda i: ("FILE_READ", {"path": f"{work}/f.txt"}),
                lambda i: ("FILE_STAT", {"path": f"{work}/f.txt"}),
                lambda i: ("FILE_LIST", {"path": str(work)}),
                lambda i: ("FILE_DELETE", {"path": f"{work}/w{i - 5}", "missing_ok": True}),
                lambda i: (
                    "FILE_MOVE",
                    {"src": f"{work}/w{i - 5}", "dst": f"{work}/m{i}", "overwrite": True},
                ),
            ]
            files = await _rounds(link, root, ROUNDS, lambda i: ops[i % len(ops)](i))
        finally:
            if racer is not None:
                racer.kill()
                racer.wait()
            agent.stop()

    ran = [a for _, a in commands if a["type"] == "COMMAND_RESULT"]
    escaped = [a for a in ran if not a["payload"]["stdout"].startswith(str(root) + "/")]
    refused = collections.Counter(a["payload"]["code"] for _, a in commands if a["type"] == "ERROR")
    print(f"\ncommands: {len(ran)} ran inside, {dict(refused)} refused, {len(escaped)} outside")
    assert not escaped, f"{len(escaped)} of {len(ran)} commands ran outside the root: {escaped[0]}"
    assert all(_typed(a) for _, a in commands)
    assert ran, "the race never let a command run: the test proves nothing"

    untyped = [(r, a) for r, a in files if not _typed(a)]
    codes = collections.Counter(
        (r[0], a["payload"]["code"], a["payload"].get("details", {}).get("reason_code"))
        for r, a in files
        if a["type"] == "ERROR"
    )
    print(f"file operations: {len(files)}, errors {dict(codes)}")
    for (kind, code, reason), message in _examples(files).items():
        print(f"  e.g. {kind} {code} {reason or ''}: {message[-90:]}")
    assert not untyped, f"{len(untyped)} untyped answers, e.g. {untyped[:3]}"
    assert _snapshot(outside) == before, "something outside the root changed"
    log = agent.log()
    assert "Traceback" not in log and "Bad file descriptor" not in log, log[-4000:]
