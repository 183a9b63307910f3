"""Exec: results, cwd, timeouts, cancel, truncation and streamed chunks.

Sections: §3.2 exec and cancel events, §3.3 POST /agent/results, §6 exec
(kill the process group, 1 MiB cap), §11.2 streaming results (seq from 0),
§11.5 (no stream for an old host).
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
from typing import Any

from tetherbed.simulator.conformance.dsh_agent.environment import DshAgentContext
from tetherbed.simulator.conformance.dsh_agent.scripted_hub import Post, ServedStream
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.dsh import constants as C

RESULT_FIELDS = {
    "requestId": str,
    "ok": bool,
    "exitCode": (int, type(None)),
    "signal": (str, type(None)),
    "stdout": str,
    "stderr": str,
    "durationMs": (int, float),
    "truncated": bool,
    "timedOut": bool,
    "error": (str, type(None)),
}


def request_id() -> str:
    return C.EXEC_REQUEST_PREFIX + secrets.token_hex(8)


async def run_command(
    ctx: DshAgentContext,
    command: str,
    *,
    served: ServedStream | None = None,
    wait: float = 20.0,
    **fields: Any,
) -> tuple[str, Post]:
    """Push one exec and wait for its result (the case departs without one)."""
    if served is None:
        _, served = await ctx.serving()
    rid = request_id()
    event = {"requestId": rid, "command": command, "cwd": None, "timeoutMs": 20000, "shell": "sh"}
    event.update(fields)
    served.push(C.Event.EXEC, event)
    result = await ctx.hub.wait_post(C.Route.RESULTS, rid, wait)
    if result is None:
        ctx.depart(f"no result for {command!r} within {wait:g} s")
    return rid, result


@case(
    "DSH-agent-exec-result",
    level=Level.MUST,
    section="§3.3 POST /api/dsh-computers/agent/results",
    rule="A command's result carries every §3.3 field with its type: its exit code, its "
    "stdout and stderr, and ok false for a non-zero exit.",
)
async def exec_result(ctx: DshAgentContext) -> None:
    rid, result = await run_command(ctx, "echo out; echo err >&2; exit 3")
    body = result.body if isinstance(result.body, dict) else {}
    for name, kind in RESULT_FIELDS.items():
        ctx.require(name in body and isinstance(body[name], kind), f"{name} is {body.get(name)!r}")
    ctx.require(body["requestId"] == rid, "the result names another request")
    ctx.require(
        body["exitCode"] == 3 and body["ok"] is False,
        f"exitCode {body['exitCode']}, ok {body['ok']}",
    )
    ctx.require(
        body["stdout"] == "out\n" and body["stderr"] == "err\n",
        f"stdout {body['stdout']!r}, stderr {body['stderr']!r}",
    )
    ctx.require(body["timedOut"] is False and body["truncated"] is False, "timedOut or truncated")


@case(
    "DSH-agent-exec-cwd",
    level=Level.MUST,
    section="§3.2 Events › exec {cwd}",
    rule="A command runs in the exec's cwd.",
)
async def exec_cwd(ctx: DshAgentContext) -> None:
    folder = ctx.work / "elsewhere"
    folder.mkdir()
    _, result = await run_command(ctx, "pwd", cwd=str(folder))
    got = str(result.get("stdout") or "").strip()
    ctx.require(_same_folder(got, str(folder)), f"pwd printed {got!r}")


def _same_folder(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


@case(
    "DSH-agent-exec-timeout",
    level=Level.MUST,
    section="§6 Exec: kill with process.kill(-pid, 'SIGKILL') on timeout",
    rule="A command still running at timeoutMs is killed with its process group; the "
    "result says timedOut: true and ok: false.",
)
async def exec_timeout(ctx: DshAgentContext) -> None:
    pidfile = ctx.work / "child.pid"
    command = f"sleep 60 & echo $! > {pidfile}; wait"
    _, result = await run_command(ctx, command, timeoutMs=1000, wait=15)
    ctx.require(result.get("timedOut") is True, f"timedOut is {result.get('timedOut')!r}")
    ctx.require(result.get("ok") is False, f"ok is {result.get('ok')!r}")
    child = int(pidfile.read_text().strip()) if pidfile.exists() else None
    if child is None:
        ctx.no_evidence("the command never wrote its child's pid")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 3
    while _alive(child):
        if loop.time() >= deadline:
            break
        await asyncio.sleep(0.1)
    ctx.require(not _alive(child), "the command's background child outlived the timeout")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


@case(
    "DSH-agent-cancel",
    level=Level.MUST,
    section="§3.2 Events › cancel; §6 cancel kills the process group",
    rule="cancel stops a running command: its result comes promptly (within 5 s), not "
    "timed out and not ok.",
)
async def cancel(ctx: DshAgentContext) -> None:
    _, stream = await ctx.serving()
    rid = request_id()
    stream.push(
        C.Event.EXEC,
        {"requestId": rid, "command": "sleep 60", "cwd": None, "timeoutMs": 60000, "shell": "sh"},
    )
    await asyncio.sleep(1.0)
    stream.push(C.Event.CANCEL, {"requestId": rid})
    result = await ctx.hub.wait_post(C.Route.RESULTS, rid, 5)
    if result is None:
        ctx.depart("no result within 5 s of cancel")
    ctx.require(
        result.get("ok") is False and result.get("timedOut") is False,
        f"ok {result.get('ok')!r}, timedOut {result.get('timedOut')!r}",
    )


@case(
    "DSH-agent-exec-truncated",
    level=Level.MUST,
    section="§6 Exec: cap each stream at 1 MiB, set truncated: true, append \\n[output truncated]",
    rule="stdout over 1 MiB is cut to 1 MiB with the marker appended and truncated: true.",
)
async def exec_truncated(ctx: DshAgentContext) -> None:
    _, result = await run_command(ctx, "head -c 1200000 /dev/zero | tr '\\0' a", wait=30)
    out = str(result.get("stdout") or "")
    ctx.observe(f"stdout {len(out)} characters")
    ctx.require(result.get("truncated") is True, f"truncated is {result.get('truncated')!r}")
    ctx.require(out.endswith(C.TRUNCATION_MARKER), "stdout does not end with the marker")
    ctx.require(len(out) <= C.MAX_OUTPUT_BYTES + len(C.TRUNCATION_MARKER), "stdout is over 1 MiB")
    ctx.require(len(out) >= C.MAX_OUTPUT_BYTES - 64, "stdout was cut well short of 1 MiB")


def chunk_output(post: Post) -> bytes:
    """The stdout of a chunk in either shape (§11.2 split, §11.6.2 typed)."""
    if post.get("type") is not None:
        return base64.b64decode(post.get("data") or "") if post.get("type") == "stdout" else b""
    return base64.b64decode(post.get("stdout") or "")


@case(
    "DSH-agent-chunks-seq",
    level=Level.MUST,
    section="§11.2 Streaming results: seq starts at 0 and increases by 1",
    rule="With stream: true (and a hello offering the stream feature) output is POSTed as "
    "chunks numbered 0, 1, 2, …; together they are the stdout, and the final result "
    "comes after the last chunk.",
)
async def chunks_seq(ctx: DshAgentContext) -> None:
    command = "for i in 1 2 3 4; do echo line$i; sleep 0.3; done"
    rid, result = await run_command(ctx, command, stream=True)
    chunks = ctx.hub.posts_to(C.Route.RESULTS_CHUNK, rid)
    seqs = [c.get("seq") for c in chunks]
    ctx.observe(f"chunk seqs: {seqs}")
    ctx.require(len(chunks) >= 2, f"{len(chunks)} chunks for output spread over 1.2 s")
    ctx.require(seqs == list(range(len(chunks))), f"seq went {seqs}, not 0, 1, 2, …")
    joined = b"".join(chunk_output(c) for c in chunks).decode("utf-8", "replace")
    ctx.require(
        joined == result.get("stdout"),
        f"the chunks say {joined!r}, the result {result.get('stdout')!r}",
    )
    ctx.require(result.t >= chunks[-1].t, "the final result came before the last chunk")


@case(
    "DSH-agent-no-stream-old-host",
    level=Level.MUST,
    section="§11.5 the agent never sends stream:true payloads unless hello advertises features",
    rule="After a hello without features, an exec asking stream: true gets no chunks, only "
    "its result.",
)
async def no_stream_old_host(ctx: DshAgentContext) -> None:
    ctx.hub.features = None
    rid, _ = await run_command(ctx, "echo a; sleep 0.3; echo b", stream=True)
    chunks = ctx.hub.posts_to(C.Route.RESULTS_CHUNK, rid)
    ctx.require(not chunks, f"{len(chunks)} chunks went to a host whose hello offered no features")
