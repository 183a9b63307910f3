"""Shell execution: command xor argv, the shell selector, the environment, cwd,
timeouts and the shared output budget.

Sections: Shell Execution (EXECUTE_COMMAND, command vs argv, shell selector,
env field, COMMAND_RESULT); Error › COMMAND_TIMEOUT, SHELL_NOT_AVAILABLE.
Every case here needs the agent to advertise the shell (its command template
gets the shell flag).
"""

from __future__ import annotations

import asyncio
import shutil

from tetherbed.simulator.conformance.agent.answers import (
    command,
    quote,
    require_error,
    require_type,
    stat,
)
from tetherbed.simulator.conformance.agent.environment import SECRET_VARIABLE, AgentContext
from tetherbed.simulator.conformance.agent.platform import AckPolicy, AgentConnection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case

SECTION = "Shell Execution › EXECUTE_COMMAND"
RESULT = "Shell Execution › COMMAND_RESULT"
TRUNCATION_MARKER = "[command output truncated]"


async def shell_connection(ctx: AgentContext, policy: AckPolicy | None = None) -> AgentConnection:
    conn = await ctx.connect(policy)
    if "shell" not in conn.advertised:
        ctx.not_applicable("the agent does not advertise the shell")
    return conn


@case(
    "LE-shell-command",
    level=Level.MUST,
    section=f"{SECTION}; {RESULT}",
    rule="A command runs in a shell and COMMAND_RESULT carries stdout, stderr, exit_code, "
    "timed_out false, duration_seconds and output_truncated false.",
    needs={"shell"},
)
async def run_command(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    answer = await command(conn, command="echo out; echo err >&2; exit 3", timeout_seconds=10)
    got = require_type(answer, "COMMAND_RESULT", "a command")
    expected = {"stdout": "out\n", "stderr": "err\n", "exit_code": 3, "timed_out": False,
                "output_truncated": False}  # fmt: skip
    wrong = [f"{k}={got.get(k)!r}" for k, v in expected.items() if got.get(k) != v]
    duration = got.get("duration_seconds")
    if not isinstance(duration, int | float) or isinstance(duration, bool) or duration < 0:
        wrong.append(f"duration_seconds={duration!r}")
    ctx.require(not wrong, "COMMAND_RESULT: " + "; ".join(wrong))


@case(
    "LE-shell-argv",
    level=Level.MUST,
    section=f"{SECTION} › command vs argv",
    rule="argv runs directly with no shell parsing (no expansion, no separators), and the "
    "shell selector is ignored.",
    needs={"shell"},
)
async def argv(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    answer = await command(
        conn, argv=["printf", "%s|%s", "$HOME", "a; echo b"], shell="powershell",
        timeout_seconds=10,
    )  # fmt: skip
    got = require_type(answer, "COMMAND_RESULT", "an argv command")
    ctx.require(got.get("stdout") == "$HOME|a; echo b", f"stdout is {got.get('stdout')!r}")


@case(
    "LE-shell-command-xor-argv",
    level=Level.MUST,
    section=f"{SECTION} › command vs argv",
    rule="Exactly one of command and argv must be set: both, or neither, is refused with an "
    "ERROR under the request's id, and nothing runs.",
    needs={"shell"},
)
async def xor(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    marker = ctx.root / "ran"
    both = await command(
        conn, command=f"touch {marker}", argv=["touch", str(marker)], timeout_seconds=10
    )
    require_error(both, (), "command and argv both set")
    neither = await command(conn, timeout_seconds=10)
    require_error(neither, (), "neither command nor argv")
    ctx.require(not marker.exists(), "a refused command ran anyway")


@case(
    "LE-shell-selector",
    level=Level.MUST,
    section=f"{SECTION} › shell selector",
    rule="On Linux: auto is bash when bash is on PATH, sh runs sh, bash runs bash.",
    needs={"shell"},
)
async def selector(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    probe = 'if [ -n "$BASH_VERSION" ]; then echo bash; else echo other; fi'
    results = {}
    for shell in ("auto", "sh", "bash"):
        got = require_type(
            await command(conn, command=probe, shell=shell, timeout_seconds=10),
            "COMMAND_RESULT",
            f"shell {shell}",
        )
        results[shell] = str(got.get("stdout", "")).strip()
    if shutil.which("bash"):
        ctx.require(results["auto"] == "bash", f"auto ran {results['auto']} with bash on PATH")
        ctx.require(results["bash"] == "bash", "shell bash did not run bash")
    # dash and busybox sh leave BASH_VERSION unset; a bash posing as sh sets it.
    ctx.observe(f"sh reports: {results['sh']}")


@case(
    "LE-shell-not-available",
    level=Level.MUST,
    section=f"{SECTION} › shell selector; Error › SHELL_NOT_AVAILABLE",
    rule="A shell that is not available on this OS (powershell, cmd on Linux; zsh or pwsh when "
    "not installed) is SHELL_NOT_AVAILABLE.",
    needs={"shell"},
)
async def not_available(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    absent = ["powershell", "cmd"] + [s for s in ("zsh", "pwsh") if not shutil.which(s)]
    for shell in absent:
        answer = await command(conn, command="echo hi", shell=shell, timeout_seconds=10)
        require_error(answer, "SHELL_NOT_AVAILABLE", f"shell {shell}")


@case(
    "LE-shell-env-merge",
    level=Level.MUST,
    section=f"{SECTION} › env field",
    rule="The wire env is merged into the command's environment.",
    needs={"shell"},
)
async def env_merge(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    answer = await command(
        conn, argv=["printenv", "CONFORM_WIRE"], env={"CONFORM_WIRE": "from the wire"},
        timeout_seconds=10,
    )  # fmt: skip
    got = require_type(answer, "COMMAND_RESULT", "printenv")
    ctx.require(got.get("stdout") == "from the wire\n", f"stdout is {got.get('stdout')!r}")


@case(
    "LE-shell-env-no-leak",
    level=Level.MUST,
    section=f"{SECTION} › env field (safe baseline)",
    rule="A command gets a safe baseline environment plus the wire env, never the agent's own "
    "environment: its token and other secrets do not leak.",
    needs={"shell"},
)
async def env_no_leak(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    got = require_type(
        await command(conn, argv=["env"], timeout_seconds=10), "COMMAND_RESULT", "env"
    )
    output = str(got.get("stdout", ""))
    ctx.require(ctx.secret not in output, f"the agent's {SECRET_VARIABLE} leaked into a command")
    ctx.require(ctx.token not in output, "the agent's bearer token leaked into a command")


@case(
    "LE-shell-env-baseline",
    level=Level.SHOULD,
    section=f"{SECTION} › env field (safe baseline)",
    rule="The baseline keeps what a program needs to behave normally: PATH and HOME.",
    needs={"shell"},
)
async def env_baseline(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    got = require_type(
        await command(conn, argv=["env"], timeout_seconds=10), "COMMAND_RESULT", "env"
    )
    names = {line.split("=", 1)[0] for line in str(got.get("stdout", "")).splitlines()}
    missing = sorted({"PATH", "HOME"} - names)
    ctx.require(not missing, f"the command's environment lacks {missing}")


@case(
    "LE-shell-cwd",
    level=Level.MUST,
    section=SECTION,
    rule="The command runs in cwd when one inside the root is given, else in the root.",
    needs={"shell"},
)
async def cwd(ctx: AgentContext) -> None:
    (ctx.root / "sub").mkdir()
    conn = await shell_connection(ctx)
    got = require_type(
        await command(conn, argv=["pwd", "-P"], cwd=str(ctx.root / "sub"), timeout_seconds=10),
        "COMMAND_RESULT",
        "pwd in sub",
    )
    ctx.require(got.get("stdout") == f"{ctx.root / 'sub'}\n", f"pwd is {got.get('stdout')!r}")


async def _timed_out(
    ctx: AgentContext, conn: AgentConnection, **payload: object
) -> tuple[dict, float]:
    started = ctx.evidence.now()
    answer = await command(conn, **payload)
    return require_type(answer, "COMMAND_RESULT", "a command past its timeout"), (
        answer.t - started
    )


@case(
    "LE-shell-timeout",
    level=Level.MUST,
    section=f"{RESULT}; Error › COMMAND_TIMEOUT",
    rule="A command past timeout_seconds comes back as COMMAND_RESULT with timed_out true and "
    "exit_code -1 (not an ERROR).",
    needs={"shell"},
)
async def timeout(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    got, _ = await _timed_out(ctx, conn, command="sleep 30", timeout_seconds=1)
    ctx.require(got.get("timed_out") is True, f"timed_out is {got.get('timed_out')!r}")
    ctx.require(got.get("exit_code") == -1, f"exit_code is {got.get('exit_code')!r}, not -1")


@case(
    "LE-shell-timeout-kills-group",
    level=Level.MUST,
    section=f"{RESULT} (timed_out)",
    rule="A timed-out command is stopped, with what it started: a background child of the "
    "command does not carry on after the COMMAND_RESULT.",
    needs={"shell"},
)
async def timeout_group(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    survivor = ctx.root / "survivor"
    script = f"(sleep 2; echo alive > {survivor}) >/dev/null 2>&1 & sleep 30"
    got, _ = await _timed_out(ctx, conn, command=script, timeout_seconds=1)
    ctx.require(got.get("timed_out") is True, f"timed_out is {got.get('timed_out')!r}")
    await asyncio.sleep(3.0)
    after = require_type(await stat(conn, survivor), "FILE_STAT_RESPONSE", "stat of the marker")
    ctx.require(
        after.get("exists") is False,
        "a child of the timed-out command was still running 2 s later (it wrote its marker)",
    )


@case(
    "LE-shell-timeout-promptness",
    level=Level.INFO,
    section=f"{RESULT} (timed_out)",
    rule="How long past timeout_seconds the COMMAND_RESULT arrives (more than a second late is "
    "worth knowing).",
    needs={"shell"},
)
async def timeout_prompt(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    _, took = await _timed_out(ctx, conn, command="sleep 30", timeout_seconds=1)
    ctx.observe(f"the result came {took:.2f} s after the request (timeout 1 s)")
    ctx.require(took <= 2.0, f"the result came {took - 1:.1f} s past the 1 s timeout")


@case(
    "LE-shell-timeout-capped",
    level=Level.MUST,
    section="Message Types › HELLO_ACK (limits); Shell Execution",
    rule="The shim applies the lower of timeout_seconds and HELLO_ACK.command_timeout_seconds; "
    "without timeout_seconds the ACK's value applies.",
    needs={"shell"},
)
async def timeout_capped(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx, AckPolicy(command_timeout_seconds=1))
    got, took = await _timed_out(ctx, conn, command="sleep 30", timeout_seconds=20)
    ctx.require(got.get("timed_out") is True, "timeout_seconds 20 over an ACK of 1 s ran on")
    ctx.require(took < 10, f"the capped command took {took:.1f} s")
    got, took = await _timed_out(ctx, conn, command="sleep 30")
    ctx.require(got.get("timed_out") is True, "no timeout_seconds: the ACK's 1 s did not apply")
    ctx.require(took < 10, f"the command without timeout_seconds took {took:.1f} s")


@case(
    "LE-shell-output-budget",
    level=Level.MUST,
    section=RESULT,
    rule="At most HELLO_ACK.max_file_size_bytes are retained across stdout and stderr; past it "
    "output_truncated is true and stderr ends with [command output truncated], inside the "
    "budget.",
    needs={"shell"},
)
async def output_budget(ctx: AgentContext) -> None:
    budget = 65_536
    conn = await shell_connection(ctx, AckPolicy(max_file_size_bytes=budget))
    script = "head -c 200000 /dev/zero | tr '\\0' a; head -c 10000 /dev/zero | tr '\\0' b >&2"
    got = require_type(
        await command(conn, command=script, timeout_seconds=20), "COMMAND_RESULT", "big output"
    )
    stdout, stderr = str(got.get("stdout", "")), str(got.get("stderr", ""))
    total = len(stdout.encode()) + len(stderr.encode())
    ctx.observe(f"{len(stdout)} bytes of stdout, {len(stderr)} of stderr kept")
    ctx.require(total <= budget, f"{total} bytes retained, over the {budget}-byte budget")
    ctx.require(got.get("output_truncated") is True, "output_truncated is not true")
    ctx.require(stderr.endswith(TRUNCATION_MARKER), f"stderr does not end with {TRUNCATION_MARKER}")
    ctx.require(got.get("exit_code") == 0, f"exit_code is {got.get('exit_code')!r}")


@case(
    "LE-shell-output-drained",
    level=Level.MUST,
    section=RESULT,
    rule="Past the budget the shim keeps draining, so a command with a lot of output finishes "
    "normally rather than blocking on a full pipe.",
    needs={"shell"},
)
async def output_drained(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx, AckPolicy(max_file_size_bytes=4096))
    got = require_type(
        await command(conn, command="head -c 8000000 /dev/zero; echo done >&2",
                      timeout_seconds=20),
        "COMMAND_RESULT",
        "8 MB of output",
    )  # fmt: skip
    ctx.require(got.get("timed_out") is False, "the command timed out: its output was not drained")
    ctx.require(got.get("exit_code") == 0, f"exit_code is {got.get('exit_code')!r}")


@case(
    "LE-shell-exit-code",
    level=Level.MUST,
    section=RESULT,
    rule="exit_code is the command's exit status; an argv program that does not exist is "
    "answered (an ERROR or a non-zero exit), never left unanswered.",
    needs={"shell"},
)
async def exit_code(ctx: AgentContext) -> None:
    conn = await shell_connection(ctx)
    got = require_type(
        await command(conn, argv=["sh", "-c", "exit 42"], timeout_seconds=10),
        "COMMAND_RESULT",
        "exit 42",
    )
    ctx.require(got.get("exit_code") == 42, f"exit_code is {got.get('exit_code')!r}")
    missing = await command(conn, argv=["/nonexistent/program"], timeout_seconds=10)
    if missing.type == "COMMAND_RESULT":
        ctx.require(missing.payload.get("exit_code") != 0, "a missing program exited 0")
    else:
        ctx.require(missing.type == "ERROR", f"a missing program got {quote(missing)}")
