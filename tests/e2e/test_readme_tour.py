"""The README's tour runs exactly as written.

The commands of its "A short tour" section run in a fresh folder that has only
what a clone made with `make venv` has (`.venv`, `scenarios/`), the client
snippet saved as `tour.py` as the README says. Two substitutions, both
mechanical: the hub's port 8765 becomes a free one (other suites may be
using 8765 on this machine), and the process and docker scenario runs and
the compose stack are left to their own tests (they take minutes;
`test_simulator_cli.py` and `tests/docker/` run them).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def tour_blocks() -> tuple[list[str], str]:
    """The tour's shell blocks, and its Python block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme.split("## A short tour", 1)[1].split("\n## ", 1)[0]
    shell = re.findall(r"```sh\n(.*?)```", tour, re.S)
    (python,) = re.findall(r"```python\n(.*?)```", tour, re.S)
    return shell, python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    shell, python = tour_blocks()
    scenarios, by_hand, *docker = shell
    assert all(block.startswith("docker compose") for block in docker)  # tests/docker/
    assert "tour.py" in by_hand and "asyncio.run(main())" in python
    (tmp_path / ".venv").symlink_to(sys.prefix)
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    port = str(free_port())
    (tmp_path / "tour.py").write_text(python.replace("8765", port))
    runs = "\n".join(
        line
        for line in scenarios.splitlines()
        if not re.search(r"--backend (process|docker)", line)
    )
    script = "\n".join(
        [
            "set -euo pipefail",
            "trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT",
            runs,
            by_hand.replace("8765", port),
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHERBED_")}
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    shipped = len(list((ROOT / "scenarios").glob("*.yaml")))
    assert f"{shipped} run(s): {shipped} pass" in out  # tetherbed run scenarios/
    assert (tmp_path / "reports" / "results.json").is_file()  # --report reports/
    assert "my-session: an agent is connected" in out
    assert "ship it\n" in out and "todo.txt" in out
    assert (tmp_path / "tour" / "workspace" / "notes" / "todo.txt").read_text() == "ship it\n"
