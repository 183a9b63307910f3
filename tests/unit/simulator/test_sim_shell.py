"""The sim backend's deterministic shell: a POSIX subset in virtual time."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.agent.config import Limits
from tetherbed.agent.environment import safe_environment
from tetherbed.simulator.sim.shell import REFUSAL_PREFIX, REFUSED_EXIT, run_sim_command
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
    assert result.exit_code == 127 and "'frobnicate' is not simulated" in result.stderr


def test_timeout_gives_timed_out_and_minus_one(tmp_path: Path) -> None:
    result, elapsed = run(tmp_path, "sleep 100", timeout=2)
    assert result.timed_out and result.exit_code == -1 and elapsed == 2


def test_argv_form_and_command_xor_argv(tmp_path: Path) -> None:
    result, _ = run(tmp_path, argv=["echo", "a b"])
    assert result.stdout == "a b\n"
    with pytest.raises(ProtocolError):
        run(tmp_path, command="echo", argv=["echo"])


def test_a_refused_script_stops_with_127_and_says_why(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "echo before; echo hi | cat; echo after")
    assert result.exit_code == REFUSED_EXIT and result.stdout == ""
    assert result.stderr == (
        "tetherbed sim shell: pipes are not supported; run on the process backend\n"
    )


def test_home_is_the_agents_and_wire_env_is_expanded(tmp_path: Path) -> None:
    loop = VirtualTimeLoop()
    try:
        request = ExecuteCommand(command='echo "$HOME" $GREETING', env={"GREETING": "hi  there"})
        result = loop.run_until_complete(
            run_sim_command(
                request,
                cwd=str(tmp_path),
                limits=Limits(),
                agent_env={"HOME": "/home/sim"},
                clock=VirtualClock(loop),
            )
        )
    finally:
        loop.close()
    assert result.stdout == "/home/sim hi there\n" and result.exit_code == 0


# --- the sim shell against real shells ----------------------------------------------------

#: The shells the sim shell must agree with: dash (`sh`) and, where installed, bash.
SHELLS = [path for path in ("/bin/sh", shutil.which("bash")) if path]

#: Command lines the sim must either run exactly as `sh` does, or refuse.
DIFFERENTIAL = [
    'echo "a;b"',
    "echo hi | cat",
    "false || echo x",
    "echo $HOME",
    'echo ~ ~/x "~" a~',
    "echo 'single $HOME' \"double $HOME\" \\$HOME",
    'X=1; echo $X; X="a  b"; echo $X; echo "$X"',
    "echo a && echo b; false && echo no; echo $?",
    "true || echo no; echo status $?",
    "false || false && echo no || echo yes",
    "exit 3",
    "echo before; exit 4; echo after",
    "exit 300",
    "false; exit",
    "echo one > f.txt; echo two >> f.txt; cat f.txt",
    "cat missing.txt; echo $?",
    "echo x > f.txt; cat missing.txt f.txt; echo $?",
    "cat .",
    "echo -n no newline",
    "echo \"\" '' x",
    'echo $UNSET x "$UNSET" y',
    "# only a comment",
    "echo a # trailing comment",
    "echo a#b",
    "echo ${HOME}/x ${?} $HOMEx",
    'echo "$" $ a$ "a$"',
    'A=x; B="$A y"; echo "$B"; echo $B',
    "echo a\necho b",
    "echo a &&\n echo b",
    "echo a;",
    "sleep 0; echo slept",
    "echo a\\ b",
    ":; echo $?",
    "pwd",
    "> empty.txt; cat empty.txt; echo $?",
    "echo $PATH",
    'echo "$GREETING" $GREETING',
    # refused: each exits 127 with the sim's message
    'echo "multi\\nline"',
    "echo 'a\\b'",
    "echo -e x",
    "echo *",
    "echo $(pwd)",
    "echo `pwd`",
    "ls",
    'echo "unterminated',
    "cd sub && pwd && cat inner.txt && echo x > made.txt; cat made.txt",
    "cd sub; cd ..; pwd; cat seed.txt",
    "cd; pwd; echo at home > h.txt; cd sub; pwd",
    "cd sub/; cd ../sub/.; pwd",
    "cd link; pwd; cat inner.txt; cd ..; pwd; cat seed.txt",
    "cd link/..; pwd; cat seed.txt",
    "cd missing/..",
    "cd missing",
    "cd seed.txt",
    "cd -",
    "cd a b",
    "if true; then echo x; fi",
    "echo a; ; echo b",
    "echo a &",
    "echo x 2> err.txt",
    "{ echo a; }",
    "(echo a)",
    "echo a > f.txt > g.txt",
    "echo a > .",
    "cat < f.txt",
    "X=1 echo $X",
    "echo $1 $#",
    "echo ${X:-default}",
    "case a in a) echo a;; esac",
    "echo {a,b}",
    "! true",
    "echo $'x'",
    "sleep 1s",
    "cat",
    "exit abc",
]


@dataclass(frozen=True)
class Outcome:
    stdout: str
    stderr: str
    exit_code: int
    files: dict[str, str]


def snapshot(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): p.read_text(errors="replace")
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def environment(home: Path) -> dict[str, str]:
    agent = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return safe_environment(agent, {"GREETING": "hi  there"})


def in_sh(shell: str, command: str, directory: Path, home: Path) -> Outcome:
    done = subprocess.run(
        [shell, "-c", command],
        cwd=directory,
        env=environment(home),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )
    return Outcome(done.stdout, done.stderr, done.returncode, snapshot(directory.parent))


def in_sim(command: str, directory: Path, home: Path) -> Outcome:
    loop = VirtualTimeLoop()
    try:
        result = loop.run_until_complete(
            run_sim_command(
                ExecuteCommand(command=command, env={"GREETING": "hi  there"}),
                cwd=str(directory),
                limits=Limits(command_timeout_seconds=30),
                agent_env={"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                clock=VirtualClock(loop),
            )
        )
    finally:
        loop.close()
    return Outcome(result.stdout, result.stderr, result.exit_code, snapshot(directory.parent))


def refused(outcome: Outcome) -> bool:
    """Exit 127 with the sim's message as the last line (what ran before it stays)."""
    last = outcome.stderr.splitlines()[-1] if outcome.stderr else ""
    return (
        outcome.exit_code == REFUSED_EXIT
        and last.startswith(REFUSAL_PREFIX)
        and last.endswith("; run on the process backend")
    )


def compare(command: str, shell: str) -> Outcome:
    """Run `command` through the sim and `shell` in twin directories; assert the rule."""
    with tempfile.TemporaryDirectory() as base:
        root = Path(base).resolve()
        for name in ("sim", "sh"):  # each side: its work folder and its HOME
            (root / name / "work" / "sub").mkdir(parents=True)
            (root / name / "work" / "seed.txt").write_text("seed\n")
            (root / name / "work" / "sub" / "inner.txt").write_text("inner\n")
            (root / name / "work" / "link").symlink_to("sub")
            (root / name / "home").mkdir()
        sim = in_sim(command, root / "sim" / "work", root / "sim" / "home")
        if refused(sim):
            return sim
        real = in_sh(shell, command, root / "sh" / "work", root / "sh" / "home")

        def as_sim(text: str) -> str:  # the twin's paths, where sh printed its own
            return text.replace(str(root / "sh"), str(root / "sim"))

        expected = Outcome(
            as_sim(real.stdout),
            as_sim(real.stderr),
            real.exit_code,
            {name: as_sim(content) for name, content in real.files.items()},
        )
        assert sim == expected, f"{command!r}: the sim differs from {shell}"
        return sim


@pytest.mark.parametrize("shell", SHELLS)
def test_the_sim_shell_runs_every_line_as_sh_does_or_refuses_it(shell: str) -> None:
    outcomes = {command: compare(command, shell) for command in DIFFERENTIAL}
    ran = [command for command, outcome in outcomes.items() if not refused(outcome)]
    # Both halves are exercised: most lines run, the unsupported ones are refused.
    assert len(ran) >= 35 and len(outcomes) - len(ran) >= 25


# Atoms of a small grammar: the words, quotes, expansions and operators people type.
_ATOMS = [
    "a", "b1", "x y", "-n", '"a  b"', "'c $HOME d'", '""', "''", "$HOME", "$X", "${X}",
    '"$X"', "$?", "~", "~/p", "\\$", "a\\ b", "$UNSET", "#c", "*", "$(echo)", "`echo`",
    "\\n", "{a}", "$1", "2",
]  # fmt: skip
_COMMANDS = [
    "echo", "echo", "echo", "true", "false", "exit", "cat f", "cat nope", "X=", "sleep 0",
    "pwd", ":", "ls", "cd", "cd sub", "cd link", "cd sub/..", "if",
]  # fmt: skip
_JOINERS = ["; ", " && ", " || ", "\n", " | ", " & ", " > f ", " >> f ", ";; "]


@st.composite
def command_lines(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for index in range(draw(st.integers(1, 4))):
        if index:
            parts.append(draw(st.sampled_from(_JOINERS)))
        head = draw(st.sampled_from(_COMMANDS))
        args = draw(st.lists(st.sampled_from(_ATOMS), max_size=3))
        if head == "exit":
            args = draw(st.lists(st.sampled_from(["0", "1", "7", "256"]), max_size=1))
        if head == "X=":
            parts.append("X=" + "".join(args))
            continue
        parts.append(" ".join([head, *args]))
    return "".join(parts)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(command_lines())
def test_generated_command_lines_run_as_sh_does_or_are_refused(command: str) -> None:
    compare(command, "/bin/sh")
