"""Mistakes at the command line fail at once, with one line that says what to fix.

A hub whose port is taken, and an agent pointed at an `http://` URL or a bare
`host:port`, used to print a traceback or retry forever. `--log-level` must
be accepted after the subcommand too, where people put it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest


def tetherbed(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tetherbed", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def one_clear_line(run: subprocess.CompletedProcess[str]) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    return lines[0]


def test_a_hub_whose_port_is_taken_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = tetherbed("hub", "--listen", f"127.0.0.1:{port}", "--state", str(tmp_path))
    assert run.returncode == 2
    line = one_clear_line(run)
    assert line.startswith("tetherbed hub: cannot listen on 127.0.0.1:")
    assert "in use" in line.lower()


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("http://127.0.0.1:8765", "ws://127.0.0.1:8765"),
        ("https://hub.example", "wss://hub.example"),
        ("127.0.0.1:8765", "ws://127.0.0.1:8765"),
        ("hub.example", "ws://hub.example"),
    ],
)
def test_an_agent_given_a_non_websocket_hub_url_says_so_in_one_line(
    tmp_path: Path, url: str, hint: str
) -> None:
    run = tetherbed(
        "agent", "--hub", url, "--token", "t", "--root", str(tmp_path), "--session-id", "s"
    )
    assert run.returncode == 2
    line = one_clear_line(run)
    assert line.startswith("tetherbed agent: --hub")
    assert f"did you mean {hint}" in line


def test_log_level_is_accepted_after_the_subcommand(tmp_path: Path) -> None:
    token = tetherbed(
        "hub", "token", "create", "--state", str(tmp_path), "--user", "u", "--kind", "agent",
        "--log-level", "DEBUG",
    )  # fmt: skip
    assert token.returncode == 0, token.stderr
    assert token.stdout.strip()
    before = tetherbed("--log-level", "WARNING", "run", "--help")
    after = tetherbed("run", "--log-level", "WARNING", "--help")
    assert before.returncode == after.returncode == 0


def test_waiting_for_an_agent_that_never_comes_ends_with_one_line() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # nothing listens here
    run = tetherbed(
        "hub", "session", "wait", "--hub", f"ws://127.0.0.1:{port}", "--token", "t",
        "--timeout", "0.5", "my-session",
    )  # fmt: skip
    assert run.returncode == 1
    assert one_clear_line(run) == (
        "tetherbed hub session wait: no agent serves session my-session after 0.5 s"
    )
