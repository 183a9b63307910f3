"""Planted defects of the agent's data operations, for proving conformance cases catch them.

Each is a deliberate departure from the spec that a real shim might ship,
switched on with `tetherbed agent --defect NAME` (never in normal use). They
wrap the real operations rather than changing them, so the code that runs
without a defect is exactly the code that runs in production:

- `crlf_read`: a text read translates CRLF to LF, hiding the bytes on disk.
- `jail_skips_symlinks`: the path jail judges the path as written and never
  looks at links, so a link inside the root leads anywhere.
- `jail_off_by_one`: the jail's containment check stops one component short,
  comparing against the root's parent, so the root's siblings count as inside
  (`../neighbour/secret` is read, written, listed, used as a cwd).
- `cwd_by_path`: a command's working directory is the checked *path*, not
  the checked directory held open, so a directory swapped for a symlink
  between the check and the child's chdir sends the command outside (the
  race the shell once had).
- `leak_environment`: a command inherits the agent's whole environment.
- `timeout_kills_shell_only`: at the timeout only the shell gets SIGTERM, its
  children live on, and the result reports the signal (-15), as the public
  reference shim does.
- `raw_window_ids`: window ids are the X window numbers, not minted `win_` ids.
- `llm_chunk_finish_reason`: every LOCAL_LLM_COMPLETION_CHUNK carries the
  finish_reason "stop", the middle ones too.
- `llm_busy_unenforced`: a second completion is not answered LOCAL_LLM_BUSY
  but sent to the backend too (where Ollama queues it behind the first).
- `accept_reserved_names`: Windows device names (CON, NUL.txt, ...) are
  created like any other name.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tetherbed.agent.config import Limits
from tetherbed.agent.environment import safe_environment
from tetherbed.agent.path_jail import PathJail, _components, _join, _Walk
from tetherbed.agent.shell import FRAME_BUDGET_BYTES, command_argv, effective_timeout, fit_output
from tetherbed.runtime.clock import Clock
from tetherbed.wire.messages import (
    CommandResult,
    ExecuteCommand,
    FileContents,
    LocalLlmCompletionChunk,
    MessageType,
    Payload,
    WindowListResponse,
)

#: The defects this module plants (agent/config.py lists every agent defect).
DATA_DEFECTS = frozenset(
    {
        "crlf_read",
        "jail_skips_symlinks",
        "jail_off_by_one",
        "cwd_by_path",
        "leak_environment",
        "timeout_kills_shell_only",
        "raw_window_ids",
        "llm_chunk_finish_reason",
        "llm_busy_unenforced",
        "accept_reserved_names",
    }
)


class SymlinkBlindJail(PathJail):
    """`jail_skips_symlinks`: the path is judged as written; links are never looked at."""

    def _walk(self, wire_path: str, *, follow_final: bool) -> _Walk:
        absolute = os.path.normpath(self._absolute(wire_path))
        if not self.contains(absolute):
            raise self.outside_error(wire_path)
        parts = _components(absolute[len(self.root) :])
        reached = self.root
        for index, name in enumerate(parts):
            candidate = _join(reached, name)
            if not os.path.lexists(candidate):
                return _Walk(reached, tuple(parts[index:]), blocked_by_file=False)
            if index < len(parts) - 1 and not os.path.isdir(candidate):
                return _Walk(candidate, tuple(parts[index + 1 :]), blocked_by_file=True)
            reached = candidate
        return _Walk(reached, (), blocked_by_file=False)

    def verify_descriptor(self, fd: int, wire_path: str) -> None:
        return None


class OffByOneJail(PathJail):
    """`jail_off_by_one`: containment is judged against the root minus its last component.

    Everything else — the walk, the descriptor checks — is the real jail's; only
    the one comparison every check ends in is one component short, the bug a
    hand-written `startswith(dirname(root))` makes.
    """

    def contains(self, canonical_path: str) -> bool:
        parent = os.path.dirname(self.root)
        if parent == "/":
            return canonical_path.startswith("/")
        return canonical_path == parent or canonical_path.startswith(parent + "/")


class CwdByPathJail(PathJail):
    """`cwd_by_path`: the working directory is checked, then named by its path."""

    @contextmanager
    def working_directory(self, wire_path: str | None) -> Iterator[str]:
        yield self.resolve_directory(wire_path)


async def leaky_shell(
    request: ExecuteCommand,
    *,
    cwd: str,
    limits: Limits,
    agent_env: Mapping[str, str],
    clock: Clock,
) -> CommandResult:
    """`leak_environment`: the agent's own environment goes to the command."""
    from tetherbed.agent.shell import run_command

    leaked = ExecuteCommand(
        command=request.command,
        argv=request.argv,
        shell=request.shell,
        cwd=request.cwd,
        timeout_seconds=request.timeout_seconds,
        env={**agent_env, **(request.env or {})},
    )
    return await run_command(leaked, cwd=cwd, limits=limits, agent_env=agent_env, clock=clock)


async def shell_only_timeout(
    request: ExecuteCommand,
    *,
    cwd: str,
    limits: Limits,
    agent_env: Mapping[str, str],
    clock: Clock,
) -> CommandResult:
    """`timeout_kills_shell_only`: SIGTERM to the shell alone; its exit status reported."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *command_argv(request),
        cwd=cwd,
        env=safe_environment(agent_env, request.env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = await asyncio.wait_for(
            process.communicate(), effective_timeout(request.timeout_seconds, limits)
        )
    except TimeoutError:
        timed_out = True
        process.send_signal(signal.SIGTERM)
        out, err = await process.communicate()
    stdout, stderr, truncated = fit_output(
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        truncated=False,
        max_bytes=limits.max_file_size_bytes,
        json_budget=FRAME_BUDGET_BYTES,
    )
    return CommandResult(
        stdout=stdout,
        stderr=stderr,
        exit_code=process.returncode if process.returncode is not None else -1,
        timed_out=timed_out,
        duration_seconds=round(time.monotonic() - started, 3),
        output_truncated=truncated,
    )


class UnguardedLocalLlm:
    """`llm_busy_unenforced`: completions go to the backend however many are running."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def complete(self, request: Any, *, limits: Limits, emit: Any) -> Any:
        if request.model not in self._inner.models:
            return await self._inner.complete(request, limits=limits, emit=emit)
        return await self._inner._complete(request, limits, emit)


def finish_every_chunk(emit: Any) -> Any:
    """`llm_chunk_finish_reason`: each chunk says "stop", whether or not it is the last."""

    async def send(kind: MessageType, payload: Payload) -> None:
        if isinstance(payload, LocalLlmCompletionChunk) and payload.finish_reason is None:
            payload = LocalLlmCompletionChunk(delta=payload.delta, finish_reason="stop")
        await emit(kind, payload)

    return send


class DefectiveOperations:
    """The data operations with the planted defects in `defects` switched on."""

    def __init__(self, inner: Any, defects: frozenset[str]) -> None:
        self._inner = inner
        self._defects = defects
        if "jail_skips_symlinks" in defects:
            inner.jail = SymlinkBlindJail(inner.jail.root, temporaries=inner.temporaries)
        if "jail_off_by_one" in defects:
            inner.jail = OffByOneJail(inner.jail.root, temporaries=inner.temporaries)
        if "cwd_by_path" in defects:
            inner.jail = CwdByPathJail(inner.jail.root, temporaries=inner.temporaries)
        if "leak_environment" in defects:
            inner._shell = leaky_shell
        if "timeout_kills_shell_only" in defects:
            inner._shell = shell_only_timeout
        if "llm_busy_unenforced" in defects and inner.local_llm is not None:
            inner.local_llm = UnguardedLocalLlm(inner.local_llm)
        if "accept_reserved_names" in defects:
            inner.jail.reserved_name = lambda name: False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)

    async def run(
        self, kind: MessageType, payload: Payload, emit: Any = None
    ) -> tuple[MessageType, Payload]:
        if emit is not None and "llm_chunk_finish_reason" in self._defects:
            emit = finish_every_chunk(emit)
        answer_kind, answer = await self._inner.run(kind, payload, emit=emit)
        crlf = "crlf_read" in self._defects and isinstance(answer, FileContents)
        if crlf and answer.encoding == "utf-8":
            answer.content = answer.content.replace("\r\n", "\n")
        if "raw_window_ids" in self._defects and isinstance(answer, WindowListResponse):
            for number, window in enumerate(answer.windows):
                window.window_id = str(0x400000 + number)
        return answer_kind, answer


def plant(operations: Any, defects: frozenset[str]) -> Any:
    """`operations` with the data defects among `defects`, or unchanged without any."""
    chosen = defects & DATA_DEFECTS
    return DefectiveOperations(operations, chosen) if chosen else operations
