"""EXECUTE_COMMAND: run one command as a child process and answer COMMAND_RESULT.

The child gets its own session (so the whole process group can be killed,
grandchildren included), stdin from /dev/null (a remote command must never wait
for a keyboard) and the safe environment (never the agent's own). Its stdout and
stderr are drained concurrently into one shared byte budget; bytes past the
budget are read and dropped so the child never blocks on a full pipe, and memory
never grows past the budget.

Why not `loop.subprocess_exec`: uvloop's spawn leaks duplicates of the child's
stdout/stderr (and other descriptors) into the child, so a detached background
job (`server >log 2>&1 &`) would still hold our pipes open; and
`asyncio.subprocess.Process.wait()` waits for the pipes as well as the process.
So the child is started with `subprocess.Popen` (close_fds on every loop) on
pipes we own, read with `loop.add_reader`, and its exit is learned by a watcher
thread that does not reap it until we are done signalling its group, so the
group id cannot be reused under us.

Why not `loop.connect_read_pipe`: on uvloop it closes the pipe's descriptor
twice (libuv closes it, then the file object it was given closes the same
number again). In a process whose worker threads open and close descriptors
all the time, the second close can hit a descriptor another thread has just
been given: that thread then fails with "Bad file descriptor", or uses a
number that by then names another file. Each read end here has one owner and
is closed exactly once.

The child starts in `cwd` as given; the agent passes the `/proc/self/fd/N` path
of the directory the jail checked and holds open (`PathJail.working_directory`),
so swapping the path for a symlink cannot move the command out of the root.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping

import msgspec

from tetherbed.agent.config import Limits
from tetherbed.agent.environment import safe_environment
from tetherbed.agent.shell_selector import Which, shell_argv
from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.limits import ENVELOPE_HEADROOM_BYTES, FRAME_LIMIT_BYTES
from tetherbed.wire.messages import CommandResult, ExecuteCommand

#: Appended to stderr, inside the byte budget, when output was cut.
TRUNCATION_MARKER = "[command output truncated]"

#: Largest COMMAND_RESULT payload JSON: the frame limit less the envelope's share.
FRAME_BUDGET_BYTES = FRAME_LIMIT_BYTES - ENVELOPE_HEADROOM_BYTES

#: How long to wait for a SIGKILLed group to exit and release the pipes.
KILL_GRACE_SECONDS = 2.0

#: What a POSIX shell answers when a program is missing / cannot be executed.
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126

#: exec() failures that mean "found but not runnable" (shell exit status 126).
_NOT_EXECUTABLE_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.ENOEXEC, errno.ENOTDIR, errno.EISDIR, errno.ELOOP}
)

_STDOUT = 1
_STDERR = 2
#: One read per readiness event; a Linux pipe holds 64 KiB.
_READ_BYTES = 64 * 1024


async def run_command(
    request: ExecuteCommand,
    *,
    cwd: str,
    limits: Limits,
    agent_env: Mapping[str, str],
    clock: Clock,
) -> CommandResult:
    """Run `request` in `cwd` (a path naming a jailed directory) and report how it went.

    - A missing `argv[0]` is answered like a shell would: exit_code 127 (126 when
      it exists but cannot be executed) with the reason in stderr, not an ERROR,
      so `command` and `argv` report a missing program the same way.
    - `timed_out` is true only when the *main* process was still running at the
      deadline and was killed (exit_code is then -1). When the main process exits
      in time but a background child keeps stdout/stderr open, draining goes on
      until EOF or the deadline; at the deadline the group is killed, yet
      `timed_out` stays false and exit_code is the main process's own status.
    - Background children that closed or redirected stdout/stderr are not waited
      for and are left running when the main process exits normally.
    - On cancellation the whole process group is killed before re-raising.

    Raises ProtocolError: INVALID_MESSAGE (not exactly one of command/argv, empty
    argv[0], NUL bytes, bad env), SHELL_NOT_AVAILABLE, PATH_NOT_FOUND when `cwd`
    vanished before the child could start.
    """
    argv = command_argv(request)
    env = safe_environment(agent_env, request.env)
    loop = asyncio.get_running_loop()
    started = clock.monotonic()
    deadline = loop.time() + effective_timeout(request.timeout_seconds, limits)
    capture = OutputCapture(min(max(limits.max_file_size_bytes, 0), FRAME_BUDGET_BYTES))
    try:
        proc, pipes = _spawn(argv, cwd, env)
    except OSError as exc:
        exit_code = _spawn_failure_exit_code(request, argv, cwd, exc)
        capture.feed(_STDERR, f"{argv[0]}: {exc.strerror or exc}\n".encode())
        return _result(capture, limits, exit_code, False, clock.monotonic() - started)
    child = _Child(loop, proc, pipes, capture)
    try:
        child.watch()
        await child.connect()
        timed_out = await _supervise(child, deadline)
    except BaseException:
        _kill_group(proc.pid)  # cancelled (agent shutting down) or failed: no orphans
        raise
    finally:
        child.close()
    exit_code = -1 if timed_out or child.returncode is None else child.returncode
    return _result(capture, limits, exit_code, timed_out, clock.monotonic() - started)


def command_argv(request: ExecuteCommand, *, which: Which = shutil.which) -> list[str]:
    """The program and arguments to exec for `request`: its argv, or a shell's."""
    if (request.command is None) == (request.argv is None):
        raise ProtocolError(
            ExtensionCode.INVALID_MESSAGE, "exactly one of 'command' and 'argv' must be set"
        )
    if request.command is not None:
        _check_no_nul([request.command])
        return shell_argv(request.shell, request.command, which=which)
    argv = list(request.argv or [])
    if not argv or not argv[0]:
        raise ProtocolError(ExtensionCode.INVALID_MESSAGE, "argv[0] must be a non-empty string")
    _check_no_nul(argv)
    return argv


def _check_no_nul(parts: list[str]) -> None:
    if any("\0" in part for part in parts):
        raise ProtocolError(ExtensionCode.INVALID_MESSAGE, "command and argv must not contain NUL")


def effective_timeout(requested: float | None, limits: Limits) -> float:
    """The request's timeout, never longer than the connection's limit."""
    ceiling = limits.command_timeout_seconds
    return min(requested or ceiling, ceiling)


class OutputCapture:
    """Raw stdout/stderr bytes under one shared budget, first come first kept."""

    def __init__(self, budget: int) -> None:
        self._room = budget
        self._data = {_STDOUT: bytearray(), _STDERR: bytearray()}
        self._cut = {_STDOUT: False, _STDERR: False}

    @property
    def truncated(self) -> bool:
        return self._cut[_STDOUT] or self._cut[_STDERR]

    def feed(self, fd: int, chunk: bytes | memoryview) -> None:
        """Keep what fits of `chunk`; the rest is dropped and remembered as a cut."""
        if len(chunk) > self._room:
            self._cut[fd] = True
            chunk = chunk[: self._room]
        if chunk:
            self._data[fd] += chunk
            self._room -= len(chunk)

    def text(self, fd: int) -> str:
        """The stream decoded as UTF-8 with replacement characters.

        A stream cut by the budget may end inside a multi-byte character; that
        partial character is dropped rather than shown as a replacement character
        the program never wrote.
        """
        data = self._data[fd]
        if self._cut[fd]:
            return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False)
        return data.decode("utf-8", "replace")


def fit_output(
    stdout: str, stderr: str, *, truncated: bool, max_bytes: int, json_budget: int
) -> tuple[str, str, bool]:
    """Trim decoded output to the byte budget and the frame, then add the marker.

    `max_bytes` bounds the UTF-8 size of stdout + stderr (replacement characters
    can make decoded text larger than the raw bytes); `json_budget` bounds their
    JSON-encoded size (a control character costs six bytes). When anything was
    cut, room for the marker is reserved inside both bounds. Tails are dropped,
    stdout's first, because stderr carries the diagnostics and the marker.
    Returns (stdout, stderr, output_truncated).
    """
    if not truncated:
        truncated = (
            _utf8_size(stdout) + _utf8_size(stderr) > max_bytes
            or _json_size(stdout) + _json_size(stderr) > json_budget
        )
    if not truncated:
        return stdout, stderr, False
    reserve = "\n" + TRUNCATION_MARKER
    for size, limit in ((_utf8_size, max_bytes), (_json_size, json_budget)):
        excess = size(stdout) + size(stderr) + size(reserve) - limit
        stdout, stderr = _drop_excess(stdout, stderr, excess, size)
    suffix = TRUNCATION_MARKER if not stderr or stderr.endswith("\n") else reserve
    room_bytes = max_bytes - _utf8_size(stdout) - _utf8_size(stderr)
    room_json = json_budget - _json_size(stdout) - _json_size(stderr)
    while suffix and (len(suffix) > room_bytes or _json_size(suffix) > room_json):
        suffix = suffix[:-1]  # only when a budget is smaller than the marker itself
    return stdout, stderr + suffix, True


def _result(
    capture: OutputCapture, limits: Limits, exit_code: int, timed_out: bool, duration: float
) -> CommandResult:
    empty = CommandResult(
        stdout="",
        stderr="",
        exit_code=exit_code,
        timed_out=timed_out,
        duration_seconds=duration,
        output_truncated=False,
    )
    # Two empty strings encode as `""`; their text is what the budget is for.
    json_budget = FRAME_BUDGET_BYTES - len(msgspec.json.encode(empty))
    stdout, stderr, truncated = fit_output(
        capture.text(_STDOUT),
        capture.text(_STDERR),
        truncated=capture.truncated,
        max_bytes=max(limits.max_file_size_bytes, 0),
        json_budget=json_budget,
    )
    return msgspec.structs.replace(empty, stdout=stdout, stderr=stderr, output_truncated=truncated)


def _spawn_failure_exit_code(
    request: ExecuteCommand, argv: list[str], cwd: str, exc: OSError
) -> int:
    """Map an exec failure to a shell-style exit status, or raise what it really was."""
    if not os.path.isdir(cwd):
        raise ProtocolError(
            ErrorCode.PATH_NOT_FOUND, f"working directory {cwd} no longer exists"
        ) from exc
    if exc.errno == errno.ENOENT:
        code = EXIT_NOT_FOUND
    elif exc.errno in _NOT_EXECUTABLE_ERRNOS:
        code = EXIT_NOT_EXECUTABLE
    else:
        raise exc  # fork/resource failures: the dispatcher answers INTERNAL_ERROR
    if request.argv is None:
        raise ProtocolError(
            ErrorCode.SHELL_NOT_AVAILABLE, f"shell {argv[0]} cannot be started: {exc.strerror}"
        ) from exc
    return code


def _spawn(
    argv: list[str], cwd: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], dict[int, int]]:
    """Start the child on two fresh pipes; returns it and the read ends by stream."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            cwd=cwd,
            env=env,
            close_fds=True,
            start_new_session=True,
        )
    except BaseException:
        os.close(out_read)
        os.close(err_read)
        raise
    finally:
        os.close(out_write)
        os.close(err_write)
    return proc, {_STDOUT: out_read, _STDERR: err_read}


class _Child:
    """One running child: its pipes feeding the capture, and its exit watcher.

    It owns the read ends of the pipes from construction and closes each one
    exactly once: at EOF, or in `close`.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        proc: subprocess.Popen[bytes],
        pipes: dict[int, int],
        capture: OutputCapture,
    ) -> None:
        self.pid = proc.pid
        self.returncode: int | None = None
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._proc = proc
        self._pipes = dict(pipes)  # stream -> read end, until closed
        self._reading: set[int] = set()
        self._capture = capture
        self._reap = threading.Event()
        #: One buffer reused for every read: output past the budget is read
        #: and dropped without allocating anything.
        self._buffer = bytearray(_READ_BYTES)
        self._view = memoryview(self._buffer)

    def watch(self) -> None:
        """Start the thread that learns the exit status."""
        threading.Thread(target=self._watch, name=f"wait-{self.pid}", daemon=True).start()

    async def connect(self) -> None:
        """Start reading both pipes, concurrently, as data arrives."""
        for stream, fd in self._pipes.items():
            os.set_blocking(fd, False)
            self._loop.add_reader(fd, self._readable, stream)
            self._reading.add(stream)

    def close(self) -> None:
        """Stop reading, and let the watcher reap the child once it has exited."""
        for stream in list(self._pipes):
            self._release(stream)
        self._reap.set()

    def _readable(self, stream: int) -> None:
        try:
            count = os.readv(self._pipes[stream], [self._buffer])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            count = 0  # EIO and the like: nothing more will come
        if count:
            self._capture.feed(stream, self._view[:count])  # copied only if kept
            return
        self._release(stream)
        if not self._reading and not self.drained.done():
            self.drained.set_result(None)

    def _release(self, stream: int) -> None:
        fd = self._pipes.pop(stream)
        if stream in self._reading:
            self._reading.discard(stream)
            self._loop.remove_reader(fd)
        os.close(fd)

    def _watch(self) -> None:
        """Thread: wait for the exit without reaping, report it, reap when released.

        Until reaped, the exited leader keeps its pid, and so the group id we
        signal, from being reused by an unrelated process.
        """
        if hasattr(os, "waitid"):
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                info = None
            self._report(_returncode(info) if info is not None else None)
            self._reap.wait()
            self._proc.wait()
        else:  # no waitid: reap at once and accept the small pid-reuse window
            self._report(self._proc.wait())

    def _report(self, status: int | None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._exited, status)
        except RuntimeError:
            pass  # the loop is closed; nobody is waiting any more

    def _exited(self, status: int | None) -> None:
        self.returncode = status
        if not self.exited.done():
            self.exited.set_result(None)


def _returncode(info: os.waitid_result) -> int:
    """Popen's convention: the exit status, or minus the signal that killed it."""
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status


async def _supervise(child: _Child, deadline: float) -> bool:
    """Wait for exit and EOF until `deadline`; kill the group past it. True if timed out."""
    if not await _settle(child.exited, deadline):
        _kill_group(child.pid)
        await _settle(child.exited, _after(KILL_GRACE_SECONDS))
        await _settle(child.drained, _after(KILL_GRACE_SECONDS))
        return True
    if not await _settle(child.drained, deadline):
        _kill_group(child.pid)  # background children holding the pipes open
        await _settle(child.drained, _after(KILL_GRACE_SECONDS))
    return False


async def _settle(future: asyncio.Future[None], deadline: float) -> bool:
    """Wait for `future` until the loop-time `deadline`; whether it is done."""
    delay = deadline - asyncio.get_running_loop().time()
    if not future.done() and delay > 0:
        await asyncio.wait([future], timeout=delay)
    return future.done()


def _after(seconds: float) -> float:
    return asyncio.get_running_loop().time() + seconds


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group (its pid, since it leads a new session)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone, or nothing left that we may signal


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _json_size(text: str) -> int:
    return len(msgspec.json.encode(text)) - 2


def _drop_excess(
    stdout: str, stderr: str, excess: int, size: Callable[[str], int]
) -> tuple[str, str]:
    """Drop at least `excess` (by `size`) from the tails, stdout's first."""
    if excess <= 0:
        return stdout, stderr
    stdout_size = size(stdout)
    if stdout_size >= excess:
        return _drop_tail(stdout, excess, size), stderr
    return "", _drop_tail(stderr, excess - stdout_size, size)


def _drop_tail(text: str, excess: int, size: Callable[[str], int]) -> str:
    """`text` without its shortest tail whose size is at least `excess`.

    Sizes are additive per character, so the tail is measured block by block
    from the end, then bisected inside the block where it crosses `excess`.
    """
    block = 64 * 1024
    end, dropped = len(text), 0
    while end > 0:
        start = max(0, end - block)
        block_size = size(text[start:end])
        if dropped + block_size >= excess:
            low, high = 1, end - start  # characters to drop from this block
            while low < high:
                mid = (low + high) // 2
                if dropped + size(text[end - mid : end]) >= excess:
                    high = mid
                else:
                    low = mid + 1
            return text[: end - low]
        dropped += block_size
        end = start
    return ""
