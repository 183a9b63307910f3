"""The sim backend's deterministic shell: a POSIX subset in virtual time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.agent.config import Limits
from tetherbed.simulator.sim.shell import run_sim_command
from tetherbed.simulator.virtual_time import VirtualClock, VirtualTimeLoop
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import CommandResult, ExecuteCommand


def run(
    tmp_path: Path,
    command: str | None = None,
    argv: list[str] | None = None,
    timeout: float | None = None,
) -> tuple[CommandResult, float]:
    loop = VirtualTimeLoop()
    try:
        request = ExecuteCommand(command=command, argv=argv, timeout_seconds=timeout)
        result = loop.run_until_complete(
            run_sim_command(
                request,
                cwd=str(tmp_path),
                limits=Limits(command_timeout_seconds=30),
                agent_env={},
                clock=VirtualClock(loop),
            )
        )
        return result, loop.time()
    finally:
        loop.close()


def test_echo_redirection_cat_and_sleep_in_virtual_time(tmp_path: Path) -> None:
    result, elapsed = run(tmp_path, "echo one > f.txt; echo two >> f.txt && sleep 5; cat f.txt")
    assert result.stdout == "one\ntwo\n"
    assert result.exit_code == 0 and elapsed == 5 and result.duration_seconds == 5


def test_and_stops_at_a_failure_and_exit_codes_carry(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "false && echo never; echo after; exit 3")
    assert result.stdout == "after\n" and result.exit_code == 3


def test_unknown_commands_are_127_like_a_shell(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "frobnicate --now")
    assert result.exit_code == 127 and "command not found" in result.stderr


def test_timeout_gives_timed_out_and_minus_one(tmp_path: Path) -> None:
    result, elapsed = run(tmp_path, "sleep 100", timeout=2)
    assert result.timed_out and result.exit_code == -1 and elapsed == 2


def test_argv_form_and_command_xor_argv(tmp_path: Path) -> None:
    result, _ = run(tmp_path, argv=["echo", "a b"])
    assert result.stdout == "a b\n"
    with pytest.raises(ProtocolError):
        run(tmp_path, command="echo", argv=["echo"])
