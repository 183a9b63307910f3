"""A minimal local-executor shim, written from the protocol text alone.

It is the "someone else's agent" of Tetherbed's own test suite: it imports
nothing from Tetherbed, only the Python standard library and `websockets`,
and implements what the spec describes, its own way — the handshake, the
files and shell operations, keepalive, capacity, the reconnect schedule and
the fatal close codes. It is not meant to be complete (no control
connection, no computer use, no local LLM), only honest about what it does.

    python minimal_agent.py --url ws://127.0.0.1:8765 --token T --session s1 \
        --root /tmp/root --machine laptop-1 [--enable-shell] [--max-concurrent 4]

Deliberate deviations for mutation tests: `--backoff-cap SECONDS` (the spec
says 60). `--plant-race` (or `MINIMAL_AGENT_PLANT_RACE=1`; off by default)
plants a race for the frame scheduler to find: the request being served is
kept in one field of the shim instead of in each answer's task, so an answer
finished after the next request arrived carries that request's id. It only
shows when a second request reaches the shim before the first is answered,
i.e. under some frame orders and not others (docs/explore.md).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import mimetypes
import os
import platform
import random
import shutil
import signal
import ssl
import stat
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

VERSION = "1.1"
FATAL = {4426, 4427, 4428, 4429}
STATUS_EVERY = 30.0
MAX_MESSAGE = 16 * 1024 * 1024
MARKER = b"[command output truncated]"


class Refusal(Exception):
    """An operation refused with one of the spec's error codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def failure(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message, "fatal": False}


def envelope(kind: str, request_id: str | None, payload: Any, **extra: Any) -> str:
    frame = {"type": kind, "id": request_id, "ts": time.time(), "version": VERSION}
    frame.update(extra)
    frame["payload"] = payload
    return json.dumps(frame)


class Jail:
    """Paths are allowed only inside the root (symlinks resolved)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, raw: Any, *, must_exist: bool = False) -> Path:
        if not isinstance(raw, str) or not raw or "\0" in raw:
            raise Refusal("PATH_INVALID_CHARS", f"bad path {raw!r}")
        candidate = Path(raw) if os.path.isabs(raw) else self.root / raw
        resolved = candidate.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise Refusal("PATH_OUTSIDE_ALLOWED_ROOT", f"{raw} is outside {self.root}")
        if must_exist and not resolved.exists():
            raise Refusal("PATH_NOT_FOUND", f"{raw} does not exist")
        return resolved


class Operations:
    def __init__(self, jail: Jail, shell: bool) -> None:
        self.jail = jail
        self.shell = shell
        self.max_file_size = 10 * 1024 * 1024
        self.command_timeout = 30.0

    async def run(self, kind: str, payload: dict[str, Any]) -> tuple[str, Any]:
        if kind == "EXECUTE_COMMAND":
            if not self.shell:
                raise Refusal("CAPABILITY_NOT_GRANTED", "the shell is off")
            return "COMMAND_RESULT", await self.execute(payload)
        handler = {
            "FILE_READ": self.read,
            "FILE_WRITE": self.write,
            "FILE_STAT": self.stat,
            "FILE_LIST": self.listing,
            "FILE_DELETE": self.delete,
            "FILE_MOVE": self.move,
        }.get(kind)
        if handler is None:
            raise Refusal("INTERNAL_ERROR", f"{kind} is not supported by this shim")
        return await asyncio.to_thread(handler, payload)

    async def execute(self, payload: dict[str, Any]) -> dict[str, Any]:
        command, argv = payload.get("command"), payload.get("argv")
        if (command is None) == (argv is None):
            raise Refusal("INTERNAL_ERROR", "exactly one of command and argv")
        cwd = self.jail.resolve(payload["cwd"]) if payload.get("cwd") else self.jail.root
        timeout = min(float(payload.get("timeout_seconds") or 30), self.command_timeout)
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "USER")}
        env.update({str(k): str(v) for k, v in (payload.get("env") or {}).items()})
        if argv is not None:
            program = [str(a) for a in argv]
        else:
            wanted = payload.get("shell") or "auto"
            shell = shutil.which("bash") or "/bin/sh" if wanted == "auto" else shutil.which(wanted)
            if shell is None:
                raise Refusal("SHELL_NOT_AVAILABLE", f"no {wanted} here")
            program = [shell, "-c", str(command)]
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *program,
            cwd=cwd,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            out, err = await process.communicate()
        budget = self.max_file_size
        truncated = len(out) + len(err) > budget
        if truncated:  # the marker ends stderr, inside the budget
            budget -= len(MARKER)
            out, err = out[:budget], err[: max(budget - len(out), 0)]
        stderr = err.decode("utf-8", "ignore")
        if truncated:
            stderr += MARKER.decode()
        return {
            "stdout": out.decode("utf-8", "ignore"),
            "stderr": stderr,
            "exit_code": -1 if timed_out else process.returncode,
            "timed_out": timed_out,
            "duration_seconds": round(time.monotonic() - started, 3),
            "output_truncated": truncated,
        }

    def read(self, payload: dict[str, Any]) -> tuple[str, Any]:
        path = self.jail.resolve(payload.get("path"), must_exist=True)
        if not path.is_file():
            raise Refusal("INTERNAL_ERROR", f"{path} is not a file")
        offset = int(payload.get("offset") or 0)
        length = payload.get("length")
        wanted = path.stat().st_size - offset if length is None else int(length)
        if wanted > self.max_file_size:
            raise Refusal("FILE_TOO_LARGE", "the read is over max_file_size_bytes")
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read(self.max_file_size if length is None else int(length))
            rest = bool(handle.read(1))
        encoding = payload.get("encoding") or "utf-8"
        if encoding == "base64":
            content = base64.b64encode(data).decode("ascii")
        else:
            content = data.decode("utf-8", "replace")
        return "FILE_CONTENTS", {
            "content": content,
            "encoding": encoding,
            "size_bytes": len(data),
            "truncated": rest,
        }

    def write(self, payload: dict[str, Any]) -> tuple[str, Any]:
        path = self.jail.resolve(payload.get("path"))
        content = payload.get("content") or ""
        if payload.get("encoding") == "base64":
            data = base64.b64decode(content)
        else:
            data = str(content).encode("utf-8")
        if len(data) > self.max_file_size:
            raise Refusal("FILE_TOO_LARGE", "content over max_file_size_bytes")
        if payload.get("create_parents"):
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():
            raise Refusal("PATH_NOT_FOUND", f"{path.parent} does not exist")
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        temporary.write_bytes(data)
        os.replace(temporary, path)
        return "ACK", {"ok": True}

    def stat(self, payload: dict[str, Any]) -> tuple[str, Any]:
        follow = payload.get("follow_symlinks", True)
        if follow:
            path = self.jail.resolve(payload.get("path"))
        else:  # the link itself: its folder resolved, its own name kept
            raw = Path(str(payload.get("path")))
            path = self.jail.resolve(str(raw.parent)) / raw.name
        try:
            info = path.stat() if follow else path.lstat()
        except FileNotFoundError:
            empty = dict.fromkeys(
                ("is_file", "is_dir", "is_symlink", "size_bytes", "mtime", "ctime", "mode"),
            )
            empty.update(owner_uid=None, owner_gid=None, mime_type=None)
            return "FILE_STAT_RESPONSE", {"exists": False, **empty, "path": str(path)}
        return "FILE_STAT_RESPONSE", {
            "exists": True,
            "is_file": stat.S_ISREG(info.st_mode),
            "is_dir": stat.S_ISDIR(info.st_mode),
            "is_symlink": path.is_symlink(),
            "size_bytes": info.st_size,
            "mtime": info.st_mtime,
            "ctime": info.st_ctime,
            "mode": f"{stat.S_IMODE(info.st_mode):04o}",
            "owner_uid": info.st_uid,
            "owner_gid": info.st_gid,
            "mime_type": mimetypes.guess_type(path.name)[0],
            "path": str(path),
        }

    def listing(self, payload: dict[str, Any]) -> tuple[str, Any]:
        base = self.jail.resolve(payload.get("path") or ".", must_exist=True)
        pattern = payload.get("glob")
        hidden = bool(payload.get("include_hidden"))
        limit = min(int(payload.get("max_entries") or 1000), 1000)
        walk = base.rglob("*") if payload.get("recursive") else base.iterdir()
        entries, truncated = [], False
        for entry in sorted(walk):
            if not hidden and entry.name.startswith("."):
                continue
            if pattern and not entry.match(pattern):
                continue
            if len(entries) >= limit:
                truncated = True
                break
            info = entry.lstat()
            entries.append(
                {
                    "name": entry.name,
                    "path": str(entry),
                    "is_file": entry.is_file(),
                    "is_dir": entry.is_dir(),
                    "is_symlink": entry.is_symlink(),
                    "size_bytes": info.st_size,
                    "mtime": info.st_mtime,
                }
            )
        return "FILE_LIST_RESPONSE", {"entries": entries, "truncated": truncated}

    def delete(self, payload: dict[str, Any]) -> tuple[str, Any]:
        path = self.jail.resolve(payload.get("path"))
        if path == self.jail.root:
            raise Refusal("PATH_OUTSIDE_ALLOWED_ROOT", "the root itself cannot be deleted")
        if not path.exists():
            if payload.get("missing_ok"):
                return "ACK", {"ok": True}
            raise Refusal("PATH_NOT_FOUND", f"{path} does not exist")
        if path.is_dir() and not path.is_symlink():
            if any(path.iterdir()) and not payload.get("recursive"):
                raise Refusal("PATH_NOT_EMPTY", f"{path} is not empty")
            shutil.rmtree(path)
        else:
            path.unlink()
        return "ACK", {"ok": True}

    def move(self, payload: dict[str, Any]) -> tuple[str, Any]:
        source = self.jail.resolve(payload.get("src"), must_exist=True)
        target = self.jail.resolve(payload.get("dst"))
        if target.exists() and not payload.get("overwrite"):
            raise Refusal("PATH_EXISTS", f"{target} exists")
        shutil.move(source, target)
        return "ACK", {"ok": True}


class Shim:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.operations = Operations(Jail(Path(args.root)), args.enable_shell)
        self.limit = args.max_concurrent
        self.in_flight = 0
        self.started = time.monotonic()
        self.stopping = False
        self.revoked = False
        self.socket: ClientConnection | None = None
        self.stopped = asyncio.Event()
        #: The planted race's shared state: the last request that arrived.
        self.serving: Any = None

    # --- the connection loop ------------------------------------------------------

    async def run(self) -> int:
        attempt = 0
        while not self.stopping:
            outcome = await self.connect_once()
            if outcome == "fatal" or self.stopping:
                return 1 if outcome == "fatal" else 0
            attempt = 0 if outcome == "served" else attempt + 1
            cap = self.args.backoff_cap
            delay = min(2.0**attempt, cap) + random.uniform(0.0, 5.0)
            log(f"reconnecting in {delay:.2f} s (attempt {attempt})")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), delay)
        return 0

    async def connect_once(self) -> str:
        """One connection: 'fatal', 'served' (it got HELLO_ACK) or 'failed'."""
        url = f"{self.args.url.rstrip('/')}/ws/local-executor/{self.args.session}"
        secure = {"ssl": ssl.create_default_context(cafile=self.args.ca)} if self.args.ca else {}
        try:
            socket = await websockets.connect(
                url,
                **secure,
                additional_headers={"Authorization": f"Bearer {self.args.token}"},
                compression=None,
                max_size=MAX_MESSAGE,
                ping_interval=None,
                open_timeout=10,
            )
        except InvalidStatus as exc:
            log(f"upgrade refused: HTTP {exc.response.status_code}")
            return "fatal" if exc.response.status_code in (401, 403) else "failed"
        except (OSError, TimeoutError, ConnectionClosed, InvalidHandshake) as exc:
            log(f"cannot connect: {exc!r}")
            return "failed"
        self.socket = socket
        served = False
        try:
            served = await self.handshake(socket)
            if served:
                await self.serve(socket)
        except ConnectionClosed:
            pass
        finally:
            self.socket = None
        code = socket.close_code
        log(f"connection closed: {code} {socket.close_reason or ''}")
        if code in FATAL or self.revoked:
            return "fatal"
        return "served" if served else "failed"

    async def handshake(self, socket: ClientConnection) -> bool:
        hello_id = str(uuid.uuid4())
        capabilities = ["files"] + (["shell"] if self.args.enable_shell else [])
        machine = platform.machine().lower()
        hello = {
            "shim_version": "0.0.1-minimal",
            "protocol_version": self.args.protocol_version,
            "machine_id": self.args.machine,
            "platform": "linux",
            "arch": "arm64" if machine in ("arm64", "aarch64") else "x86_64",
            "screen_resolution": None,
            "capabilities": capabilities,
            "allowed_root": str(self.operations.jail.root),
            "local_llm_models": [],
            "hardware_devices": [],
        }
        await socket.send(envelope("HELLO", hello_id, hello))
        try:
            frame = json.loads(await asyncio.wait_for(socket.recv(), 10))
        except TimeoutError:
            log("no answer to HELLO")
            await socket.close(1002, "no HELLO_ACK")
            return False
        if frame.get("type") != "HELLO_ACK" or frame.get("id") != hello_id:
            log(f"no HELLO_ACK: {frame.get('type')}")
            return False
        ack = frame.get("payload") or {}
        if ack.get("session_id") != self.args.session:
            log("HELLO_ACK for another session: giving up")
            self.revoked = True
            await socket.close(1008, "wrong session")
            return False
        major = str(ack.get("protocol_version", VERSION)).split(".")[0]
        if major != self.args.protocol_version.split(".")[0]:
            log("major version mismatch")
            return False
        self.limit = min(self.args.max_concurrent, int(ack.get("max_concurrent") or 4))
        self.operations.max_file_size = int(ack.get("max_file_size_bytes") or 10485760)
        self.operations.command_timeout = float(ack.get("command_timeout_seconds") or 30)
        granted = set(ack.get("granted_capabilities") or [])
        self.operations.shell = self.args.enable_shell and "shell" in granted
        await self.status(socket)
        return True

    async def serve(self, socket: ClientConnection) -> None:
        tasks: set[asyncio.Task[None]] = set()
        ticker = asyncio.create_task(self.heartbeat(socket))
        try:
            async for raw in socket:
                frame = json.loads(raw)
                kind, request_id = frame.get("type"), frame.get("id")
                if _major(frame.get("version")) != _major(VERSION):
                    log(f"dropped a {kind} frame of version {frame.get('version')}")
                elif kind == "PING":
                    await socket.send(envelope("PONG", request_id, {}))
                elif kind == "SESSION_REVOKED":
                    log(f"session revoked: {(frame.get('payload') or {}).get('reason')}")
                    self.revoked = True
                    await socket.close(4428, "session revoked")
                    return
                elif self.in_flight >= self.limit:
                    await self.error(socket, request_id, "SHIM_OVERLOADED", "at max_concurrent")
                else:
                    self.in_flight += 1
                    self.serving = request_id
                    task = asyncio.create_task(self.answer(socket, kind, request_id, frame))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        finally:
            ticker.cancel()
            for task in tasks:
                task.cancel()

    async def answer(
        self, socket: ClientConnection, kind: str, request_id: str, frame: Any
    ) -> None:
        try:
            reply, payload = await self.operations.run(kind, frame.get("payload") or {})
        except Refusal as refusal:
            reply, payload = "ERROR", failure(refusal.code, str(refusal))
        except Exception as exc:
            reply, payload = "ERROR", failure("INTERNAL_ERROR", str(exc))
        if self.args.plant_race:  # the planted bug: whoever arrived last
            request_id = self.serving
        was_full = self.in_flight >= self.limit
        self.in_flight -= 1
        if self.revoked:
            return  # after SESSION_REVOKED nothing more is sent
        free = self.limit - self.in_flight
        with contextlib.suppress(ConnectionClosed):
            await socket.send(envelope(reply, request_id, payload, pending_capacity=free))
            if was_full:
                await self.status(socket)

    async def error(self, socket: ClientConnection, request_id: Any, code: str, text: str) -> None:
        payload = failure(code, text)
        free = self.limit - self.in_flight
        await socket.send(envelope("ERROR", request_id, payload, pending_capacity=free))

    async def status(self, socket: ClientConnection) -> None:
        payload = {
            "in_flight": self.in_flight,
            "max_concurrent": self.limit,
            "queue_depth": 0,
            "audit_log_bytes": 0,
            "uptime_seconds": round(time.monotonic() - self.started, 1),
        }
        free = self.limit - self.in_flight
        await socket.send(envelope("STATUS", str(uuid.uuid4()), payload, pending_capacity=free))

    async def heartbeat(self, socket: ClientConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                await asyncio.sleep(STATUS_EVERY)
                await self.status(socket)

    async def stop(self) -> None:
        self.stopping = True
        self.stopped.set()
        if self.socket is not None:
            await self.socket.close(1000, "shim stopping")


def _major(version: object) -> str:
    """A frame's major version; a frame without one is taken as ours."""
    return str(version or VERSION).partition(".")[0]


def log(text: str) -> None:
    print(f"minimal-agent: {text}", file=sys.stderr, flush=True)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the platform's base URL")
    parser.add_argument("--token", default=os.environ.get("TETHERBED_AGENT_TOKEN"))
    parser.add_argument("--session", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--enable-shell", action="store_true")
    parser.add_argument("--max-concurrent", type=int, default=4)
    parser.add_argument("--protocol-version", default=VERSION)
    parser.add_argument("--backoff-cap", type=float, default=60.0)
    parser.add_argument("--ca", help="CA bundle to trust for a wss:// URL")
    parser.add_argument(
        "--plant-race",
        action="store_true",
        default=os.environ.get("MINIMAL_AGENT_PLANT_RACE", "") not in ("", "0"),
        help="answer with the id of the request that arrived last (a planted race)",
    )
    args = parser.parse_args(argv)
    shim = Shim(args)
    loop = asyncio.get_running_loop()
    runner = asyncio.create_task(shim.run())
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: asyncio.ensure_future(shim.stop()))
    return await runner


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
