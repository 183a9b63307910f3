"""EXECUTE_COMMAND against real processes: output, budgets, timeouts, no orphans, no leaks."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import msgspec
import pytest
import uvloop

from tetherbed.agent.config import Limits
from tetherbed.agent.shell import (
    FRAME_BUDGET_BYTES,
    TRUNCATION_MARKER,
    effective_timeout,
    run_command,
)
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import CommandResult, ExecuteCommand

KiB = 1024
MiB = 1024 * KiB
AGENT_ENV = {"HOME": "/home/agent", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


async def run(
    request: ExecuteCommand,
    cwd: Path | str,
    *,
    limits: Limits | None = None,
    agent_env: Mapping[str, str] = AGENT_ENV,
) -> CommandResult:
    return await run_command(
        request,
        cwd=str(cwd),
        limits=limits or Limits(command_timeout_seconds=20),
        agent_env=agent_env,
        clock=SystemClock(),
    )


def alive(pid: int) -> bool:
    """Whether `pid` is a live process; a zombie (nobody reaped it yet) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # it vanished while we looked
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def gone(pid: int, within: float = 3.0) -> bool:
    end = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > end:
            return False
        await asyncio.sleep(0.02)
    return True


def pid_in(path: Path) -> int | None:
    """The pid a shell wrote to `path`, once the whole line is there."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") else None


def real_path(path: Path) -> str:
    return os.path.realpath(path)


async def read_pid(path: Path, within: float = 5.0) -> int:
    end = time.monotonic() + within
    while time.monotonic() < end:
        pid = pid_in(path)
        if pid is not None:
            return pid
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} was never written")


def retained_bytes(result: CommandResult) -> int:
    return len(result.stdout.encode()) + len(result.stderr.encode())


# --- running ----------------------------------------------------------------


async def test_a_command_runs_in_a_shell_and_reports_its_exit_code(tmp_path: Path) -> None:
    result = await run(ExecuteCommand(command="echo out; echo err >&2; exit 3"), tmp_path)
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert not result.timed_out
    assert not result.output_truncated
    assert 0 < result.duration_seconds < 10


async def test_argv_runs_directly_without_shell_parsing(tmp_path: Path) -> None:
    result = await run(ExecuteCommand(argv=["echo", "$HOME", "a  b", "*", ";", "|"]), tmp_path)
    assert result.stdout == "$HOME a  b * ; |\n"
    assert result.exit_code == 0


async def test_shell_is_ignored_when_argv_is_set(tmp_path: Path) -> None:
    result = await run(ExecuteCommand(argv=["echo", "hi"], shell="cmd"), tmp_path)
    assert result.stdout == "hi\n"


async def test_a_missing_argv_program_exits_127_like_a_shell(tmp_path: Path) -> None:
    result = await run(ExecuteCommand(argv=["tetherbed-no-such-program", "x"]), tmp_path)
    assert result.exit_code == 127
    assert "tetherbed-no-such-program" in result.stderr
    assert result.stdout == ""
    assert not result.timed_out


async def test_a_non_executable_argv_program_exits_126(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho never\n")
    script.chmod(0o644)
    result = await run(ExecuteCommand(argv=[str(script)]), tmp_path)
    assert result.exit_code == 126
    assert "script.sh" in result.stderr


async def test_a_program_killed_by_a_signal_reports_minus_the_signal(tmp_path: Path) -> None:
    result = await run(ExecuteCommand(command="kill -TERM $$"), tmp_path)
    assert result.exit_code == -signal.SIGTERM
    assert not result.timed_out


@pytest.mark.parametrize(
    "request_",
    [
        ExecuteCommand(command="echo a", argv=["echo", "b"]),
        ExecuteCommand(),
        ExecuteCommand(argv=[]),
        ExecuteCommand(argv=[""]),
        ExecuteCommand(argv=["echo", "a\0b"]),
        ExecuteCommand(command="echo \0"),
    ],
    ids=["both", "neither", "empty-argv", "empty-argv0", "nul-in-argv", "nul-in-command"],
)
async def test_exactly_one_of_command_and_argv_must_be_usable(
    request_: ExecuteCommand, tmp_path: Path
) -> None:
    with pytest.raises(ProtocolError) as caught:
        await run(request_, tmp_path)
    assert caught.value.code == ExtensionCode.INVALID_MESSAGE


async def test_a_windows_shell_is_not_available(tmp_path: Path) -> None:
    with pytest.raises(ProtocolError) as caught:
        await run(ExecuteCommand(command="dir", shell="cmd"), tmp_path)
    assert caught.value.code == ErrorCode.SHELL_NOT_AVAILABLE


async def test_the_sh_selector_runs_sh(tmp_path: Path) -> None:
    result = await run(ExecuteCommand(command="echo $((6 * 7))", shell="sh"), tmp_path)
    assert result.stdout == "42\n"


async def test_the_working_directory_is_cwd(tmp_path: Path) -> None:
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    result = await run(
        ExecuteCommand(argv=[sys.executable, "-c", "import os; print(os.getcwd())"]), workdir
    )
    assert result.stdout.strip() == real_path(workdir)


async def test_a_vanished_working_directory_is_path_not_found(tmp_path: Path) -> None:
    with pytest.raises(ProtocolError) as caught:
        await run(ExecuteCommand(argv=["true"]), tmp_path / "gone")
    assert caught.value.code == ErrorCode.PATH_NOT_FOUND


STDIN_IS_DEV_NULL = """
import os, stat
fd0, null = os.fstat(0), os.stat(os.devnull)
print(stat.S_ISCHR(fd0.st_mode) and fd0.st_rdev == null.st_rdev)
"""


async def test_stdin_is_dev_null_even_when_the_agent_has_a_real_stdin(tmp_path: Path) -> None:
    # Give this process a stdin a child could block on, as a terminal would be.
    read_end, write_end = os.pipe()
    saved_stdin = os.dup(0)
    os.dup2(read_end, 0)
    try:
        check = await run(ExecuteCommand(argv=[sys.executable, "-c", STDIN_IS_DEV_NULL]), tmp_path)
        cat = await run(ExecuteCommand(argv=["cat"], timeout_seconds=2), tmp_path)
    finally:
        os.dup2(saved_stdin, 0)
        for fd in (saved_stdin, read_end, write_end):
            os.close(fd)
    assert check.stdout == "True\n"
    assert (cat.stdout, cat.exit_code, cat.timed_out) == ("", 0, False)


async def test_duration_comes_from_the_given_clock(tmp_path: Path) -> None:
    class SteppingClock:
        def __init__(self) -> None:
            self.now = 100.0

        def time(self) -> float:
            return 1e9

        def monotonic(self) -> float:
            self.now += 2.5
            return self.now

    result = await run_command(
        ExecuteCommand(argv=["true"]),
        cwd=str(tmp_path),
        limits=Limits(),
        agent_env=AGENT_ENV,
        clock=SteppingClock(),
    )
    assert result.duration_seconds == 2.5


# --- environment ------------------------------------------------------------


async def test_the_agent_environment_does_not_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHERBED_CANARY", "os-environ-canary")
    agent_env = {
        **AGENT_ENV,
        "LC_ALL": "C.UTF-8",
        "TETHERBED_TOKEN": "token-canary",
        "AWS_SECRET_ACCESS_KEY": "aws-canary",
    }
    result = await run(
        ExecuteCommand(argv=["env"], env={"WIRE_VAR": "from the wire"}),
        tmp_path,
        agent_env=agent_env,
    )
    child_env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    for secret in ("token-canary", "aws-canary", "os-environ-canary"):
        assert secret not in result.stdout
    assert "TETHERBED_TOKEN" not in child_env
    assert "TETHERBED_CANARY" not in child_env
    assert child_env["HOME"] == "/home/agent"
    assert child_env["PATH"] == AGENT_ENV["PATH"]
    assert child_env["LC_ALL"] == "C.UTF-8"
    assert child_env["WIRE_VAR"] == "from the wire"


async def test_an_invalid_wire_env_is_rejected_before_running(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(ProtocolError) as caught:
        await run(ExecuteCommand(command=f"touch {marker}", env={"A=B": "x"}), tmp_path)
    assert caught.value.code == ExtensionCode.INVALID_MESSAGE
    assert not marker.exists()


# --- timeouts and process groups --------------------------------------------


def test_the_timeout_is_the_request_s_capped_by_the_limit() -> None:
    limits = Limits(command_timeout_seconds=30)
    assert effective_timeout(None, limits) == 30
    assert effective_timeout(5, limits) == 5
    assert effective_timeout(300, limits) == 30


async def test_a_timeout_kills_the_whole_group_and_keeps_the_output(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await run(
        ExecuteCommand(
            command="echo started; echo $$ > main; sleep 1000 & echo $! > grandchild; sleep 1000",
            timeout_seconds=0.5,
        ),
        tmp_path,
    )
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert result.exit_code == -1
    assert result.stdout == "started\n"
    assert 0.4 < elapsed < 5
    assert await gone(await read_pid(tmp_path / "grandchild"))
    assert await gone(await read_pid(tmp_path / "main"))


async def test_the_limit_caps_a_longer_requested_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await run(
        ExecuteCommand(argv=["sleep", "1000"], timeout_seconds=10),
        tmp_path,
        limits=Limits(command_timeout_seconds=0.5),
    )
    assert result.timed_out
    assert result.exit_code == -1
    assert time.monotonic() - started < 5


async def test_background_children_holding_the_pipes_are_killed_at_the_deadline(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    result = await run(
        ExecuteCommand(command="sleep 1000 & echo $! > bg; echo done", timeout_seconds=0.5),
        tmp_path,
    )
    elapsed = time.monotonic() - started
    # The main process exited by itself: not a timeout, its own exit status.
    assert not result.timed_out
    assert result.exit_code == 0
    assert result.stdout == "done\n"
    assert 0.4 < elapsed < 5
    assert await gone(await read_pid(tmp_path / "bg"))


async def test_detached_background_children_do_not_hold_the_result(tmp_path: Path) -> None:
    result = await run(
        ExecuteCommand(command="sleep 1000 >/dev/null 2>&1 & echo $!", timeout_seconds=10),
        tmp_path,
    )
    background = int(result.stdout)
    try:
        assert result.duration_seconds < 5
        assert not result.timed_out
        assert alive(background)  # left running on purpose: see run_command's docstring
    finally:
        os.kill(background, signal.SIGKILL)


async def test_cancellation_kills_the_whole_group(tmp_path: Path) -> None:
    task = asyncio.create_task(
        run(
            ExecuteCommand(
                command="echo $$ > main; sleep 1000 & echo $! > grandchild; wait",
                timeout_seconds=15,
            ),
            tmp_path,
        )
    )
    main_pid = await read_pid(tmp_path / "main")
    grandchild_pid = await read_pid(tmp_path / "grandchild")
    assert alive(main_pid)
    assert alive(grandchild_pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(grandchild_pid)
    assert await gone(main_pid)


# --- output budget ----------------------------------------------------------


async def test_fifty_megabytes_stay_within_the_budget_without_deadlock(tmp_path: Path) -> None:
    budget = 64 * KiB
    started = time.monotonic()
    result = await run(
        ExecuteCommand(command="head -c 50000000 /dev/zero | tr '\\0' x", timeout_seconds=20),
        tmp_path,
        limits=Limits(max_file_size_bytes=budget, command_timeout_seconds=20),
    )
    assert not result.timed_out
    assert result.exit_code == 0  # the writer was drained to the end
    assert result.output_truncated
    assert result.stderr.endswith(TRUNCATION_MARKER)
    assert retained_bytes(result) <= budget
    assert result.stdout == "x" * len(result.stdout)
    assert len(result.stdout) >= budget - len(TRUNCATION_MARKER) - 1
    assert time.monotonic() - started < 15


HEAVY_BOTH_STREAMS = """
import sys
chunk_out = b"o" * 65536
chunk_err = b"e" * 65536
for _ in range({rounds}):
    sys.stdout.buffer.write(chunk_out); sys.stdout.flush()
    sys.stderr.buffer.write(chunk_err); sys.stderr.flush()
"""


async def test_heavy_interleaved_output_on_both_streams_is_drained(tmp_path: Path) -> None:
    budget = 100 * KiB
    script = HEAVY_BOTH_STREAMS.format(rounds=64)  # 4 MiB on each stream
    result = await run(
        ExecuteCommand(argv=[sys.executable, "-c", script], timeout_seconds=20),
        tmp_path,
        limits=Limits(max_file_size_bytes=budget, command_timeout_seconds=20),
    )
    assert not result.timed_out
    assert result.exit_code == 0
    assert result.output_truncated
    assert retained_bytes(result) <= budget
    assert result.stdout and set(result.stdout) == {"o"}
    assert result.stderr.endswith(TRUNCATION_MARKER)


async def test_both_streams_are_kept_whole_when_they_fit(tmp_path: Path) -> None:
    script = HEAVY_BOTH_STREAMS.format(rounds=16)  # 1 MiB on each stream
    result = await run(
        ExecuteCommand(argv=[sys.executable, "-c", script], timeout_seconds=20),
        tmp_path,
        limits=Limits(max_file_size_bytes=2 * MiB, command_timeout_seconds=20),
    )
    assert not result.output_truncated
    assert result.stdout == "o" * MiB
    assert result.stderr == "e" * MiB


async def test_output_exactly_at_the_budget_is_not_truncated(tmp_path: Path) -> None:
    result = await run(
        ExecuteCommand(command="printf 1234567; printf 890 >&2"),
        tmp_path,
        limits=Limits(max_file_size_bytes=10),
    )
    assert (result.stdout, result.stderr, result.output_truncated) == ("1234567", "890", False)


async def test_non_utf8_output_is_decoded_with_replacement(tmp_path: Path) -> None:
    result = await run(ExecuteCommand(command="printf 'ok \\377\\376 end'"), tmp_path)
    assert result.stdout == "ok \ufffd\ufffd end"


async def test_replacement_characters_stay_within_the_budget(tmp_path: Path) -> None:
    budget = 1000
    result = await run(
        ExecuteCommand(
            argv=[sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\xff' * 5000)"]
        ),
        tmp_path,
        limits=Limits(max_file_size_bytes=budget),
    )
    assert result.output_truncated
    assert retained_bytes(result) <= budget
    assert result.stdout.startswith("\ufffd" * 100)


async def test_the_result_fits_the_frame_despite_json_escaping(tmp_path: Path) -> None:
    # 16 MiB of control characters would be 96 MiB of JSON escapes.
    result = await run(
        ExecuteCommand(command="head -c 17000000 /dev/zero | tr '\\0' '\\1'", timeout_seconds=20),
        tmp_path,
        limits=Limits(max_file_size_bytes=16 * MiB, command_timeout_seconds=20),
    )
    encoded = len(msgspec.json.encode(result))
    assert result.output_truncated
    assert encoded <= FRAME_BUDGET_BYTES
    assert encoded > FRAME_BUDGET_BYTES - 64  # trimmed no more than needed
    assert result.stderr.endswith(TRUNCATION_MARKER)


# --- uvloop -----------------------------------------------------------------


def test_under_uvloop_children_get_no_stray_descriptors_and_groups_die(tmp_path: Path) -> None:
    """uvloop's own spawn leaks pipe copies into children; ours must not."""

    async def scenario() -> None:
        listing = await run(
            ExecuteCommand(command="ls /proc/self/fd 2>/dev/null || ls /dev/fd"), tmp_path
        )
        descriptors = {int(name) for name in listing.stdout.split()}
        assert descriptors <= {0, 1, 2, 3}  # 3 is the listing's own directory handle

        timed = await run(
            ExecuteCommand(command="sleep 1000 & echo $! > bg; sleep 1000", timeout_seconds=0.5),
            tmp_path,
        )
        assert timed.timed_out
        assert timed.exit_code == -1
        assert await gone(await read_pid(tmp_path / "bg"))

    uvloop.run(scenario())
