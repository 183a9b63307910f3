"""A double of the public reference shim, for what `--strict-wire` does not imitate.

Tetherbed's own agent with `--strict-wire` plays the public shim's strict
validation (and the hub's tests use it for that). Two behaviours of the shim
it deliberately leaves out — per-minute rate limits answered SHIM_OVERLOADED,
and relative paths resolved against the shim's own working directory — are
what some of the hub's and the client's findings need, so this small double
has them. What it copies of the public shim
(Significant-Gravitas/autogpt-local-executor):

- a request whose frame the spec's strict schema (`wire/strict.py`) refuses —
  an unknown field, a wrong type, a null where the spec shows none — or whose
  envelope version has another major, is dropped without any answer;
- responses carry `pending_capacity`; STATUS goes out every `--status-interval`
  seconds and on the full → not-full edge (not right after the handshake);
- SHIM_OVERLOADED answers both a request beyond `max_concurrent` and one over
  the per-minute command rate;
- a relative path is resolved against its own working directory, so one that
  does not land inside the root is PATH_OUTSIDE_ALLOWED_ROOT.

Run as a process, like an agent command:

    python tests/e2e/public_shim_double.py --hub URL --token T --session-id S --root DIR
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tetherbed.wire.strict import StrictViolation, check_frame

VERSION = "1.1"


class Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class StrictPeer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.root = Path(args.root).resolve()
        self.max_concurrent = args.max_concurrent
        self.in_flight = 0
        self.commands: list[float] = []  # start times in the last minute
        self.started = time.monotonic()
        self.conn: ClientConnection | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def log(self, line: str) -> None:
        print(f"shim-double: {line}", file=sys.stderr, flush=True)

    # --- the connection ------------------------------------------------------------

    async def run(self) -> int:
        url = f"{self.args.hub.rstrip('/')}/ws/local-executor/{self.args.session_id}"
        try:
            self.conn = await connect(
                url,
                additional_headers={"Authorization": f"Bearer {self.args.token}"},
                compression=None,
                max_size=16 * 1024 * 1024,
                ping_interval=None,
                proxy=None,
            )
        except InvalidStatus as exc:
            self.log(f"upgrade refused: HTTP {exc.response.status_code}")
            return 4
        await self.send("HELLO", "hello-1", self.hello(), capacity=False)
        ack = msgspec.json.decode(await self.conn.recv())
        if ack.get("type") != "HELLO_ACK":
            self.log(f"no HELLO_ACK: {ack}")
            return 3
        self.max_concurrent = min(self.max_concurrent, ack["payload"].get("max_concurrent", 4))
        print("ready", flush=True)
        status = asyncio.ensure_future(self.status_loop())
        try:
            async for data in self.conn:
                self.receive(data if isinstance(data, bytes) else data.encode())
        except ConnectionClosed:
            pass
        finally:
            status.cancel()
        code = self.conn.close_code
        self.log(f"connection closed with {code}")
        return 28 if code in (4426, 4427, 4428, 4429) else 0

    def hello(self) -> dict[str, Any]:
        return {
            "shim_version": "shim-double",
            "protocol_version": VERSION,
            "machine_id": self.args.machine_id,
            "platform": "linux",
            "arch": "x86_64",
            "screen_resolution": None,
            "capabilities": ["files", "shell"],
            "allowed_root": str(self.root),
            "local_llm_models": [],
            "hardware_devices": [],
        }

    async def send(
        self, kind: str, request_id: str | None, payload: Any, *, capacity: bool = True
    ) -> None:
        assert self.conn is not None
        frame: dict[str, Any] = {
            "type": kind,
            "id": request_id,
            "ts": time.time(),
            "version": VERSION,
        }
        if capacity:
            frame["pending_capacity"] = max(self.max_concurrent - self.in_flight, 0)
        frame["payload"] = payload
        with contextlib.suppress(ConnectionClosed):
            await self.conn.send(msgspec.json.encode(frame).decode())

    async def status_loop(self) -> None:
        while True:
            await asyncio.sleep(self.args.status_interval)
            await self.status()

    async def status(self) -> None:
        await self.send(
            "STATUS",
            f"status-{time.monotonic_ns()}",
            {
                "in_flight": self.in_flight,
                "max_concurrent": self.max_concurrent,
                "queue_depth": 0,
                "audit_log_bytes": 0,
                "uptime_seconds": time.monotonic() - self.started,
            },
        )

    # --- requests ----------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        try:
            envelope = check_frame(data, from_shim=False)
        except StrictViolation as exc:
            self.log(f"dropped: {exc}")
            return
        if envelope.version and envelope.version.split(".")[0] != VERSION.split(".", maxsplit=1)[0]:
            self.log(f"dropped: version {envelope.version}")
            return
        kind, request_id = envelope.type, envelope.id
        if kind == "PING":
            self.spawn(self.send("PONG", request_id, {}))
            return
        if kind in ("HELLO_ACK", "SESSION_REVOKED"):
            return
        payload = msgspec.json.decode(envelope.payload)
        if self.in_flight >= self.max_concurrent:
            self.refuse(request_id, "max_concurrent reached")
            return
        if kind == "EXECUTE_COMMAND":
            now = time.monotonic()
            self.commands = [t for t in self.commands if now - t < 60]
            if len(self.commands) >= self.args.commands_per_minute:
                self.refuse(request_id, "command rate limit reached")
                return
            self.commands.append(now)
        self.in_flight += 1
        self.spawn(self.serve(kind, request_id, payload))

    def refuse(self, request_id: str | None, why: str) -> None:
        self.log(f"refused {request_id}: {why}")
        payload = {"code": "SHIM_OVERLOADED", "message": why, "fatal": False}
        self.spawn(self.send("ERROR", request_id, payload))

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def serve(self, kind: str, request_id: str | None, payload: dict[str, Any]) -> None:
        was_full = self.in_flight >= self.max_concurrent
        try:
            answer_type, answer = await self.handle(kind, payload)
        except Refused as exc:
            answer_type, answer = (
                "ERROR",
                {"code": exc.code, "message": exc.message, "fatal": False},
            )
        except OSError as exc:
            answer_type = "ERROR"
            answer = {"code": "INTERNAL_ERROR", "message": str(exc), "fatal": False}
        self.in_flight -= 1
        await self.send(answer_type, request_id, answer)
        if was_full:
            await self.status()  # the full → not-full edge

    def path(self, wire: str) -> Path:
        resolved = Path(os.getcwd(), wire).resolve()  # relative: against *our* cwd
        if resolved != self.root and self.root not in resolved.parents:
            raise Refused(
                "PATH_OUTSIDE_ALLOWED_ROOT", f"Path {wire} is outside allowed root {self.root}"
            )
        return resolved

    async def handle(self, kind: str, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if kind == "FILE_STAT":
            target = self.path(p["path"])
            if not target.exists():
                return "FILE_STAT_RESPONSE", {
                    "exists": False,
                    "is_file": None,
                    "is_dir": None,
                    "is_symlink": None,
                    "size_bytes": None,
                    "mtime": None,
                    "ctime": None,
                    "mode": None,
                    "owner_uid": None,
                    "owner_gid": None,
                    "mime_type": None,
                    "path": str(target),
                }
            st = target.stat()
            return "FILE_STAT_RESPONSE", {
                "exists": True,
                "is_file": target.is_file(),
                "is_dir": target.is_dir(),
                "is_symlink": target.is_symlink(),
                "size_bytes": st.st_size,
                "mtime": st.st_mtime,
                "ctime": st.st_ctime,
                "mode": f"{st.st_mode & 0o7777:04o}",
                "owner_uid": st.st_uid,
                "owner_gid": st.st_gid,
                "mime_type": None,
                "path": str(target),
            }
        if kind == "FILE_READ":
            data = self.path(p["path"]).read_bytes()
            if p.get("encoding", "utf-8") == "base64":
                content = base64.b64encode(data).decode()
            else:
                content = data.decode()
            return "FILE_CONTENTS", {
                "content": content,
                "encoding": p.get("encoding", "utf-8"),
                "size_bytes": len(data),
                "truncated": False,
            }
        if kind == "FILE_WRITE":
            target = self.path(p["path"])
            if p.get("create_parents"):
                target.parent.mkdir(parents=True, exist_ok=True)
            content = p["content"]
            raw = base64.b64decode(content) if p.get("encoding") == "base64" else content.encode()
            target.write_bytes(raw)
            return "ACK", {"ok": True}
        if kind == "FILE_LIST":
            target = self.path(p["path"])
            entries = []
            for child in sorted(target.iterdir()):
                st = child.lstat()
                entries.append(
                    {
                        "name": child.name,
                        "path": str(child),
                        "is_file": child.is_file(),
                        "is_dir": child.is_dir(),
                        "is_symlink": child.is_symlink(),
                        "size_bytes": st.st_size,
                        "mtime": st.st_mtime,
                    }
                )
            return "FILE_LIST_RESPONSE", {"entries": entries, "truncated": False}
        if kind == "EXECUTE_COMMAND":
            return "COMMAND_RESULT", await self.execute(p)
        raise Refused("CAPABILITY_NOT_GRANTED", f"{kind} is not served by the shim double")

    async def execute(self, p: dict[str, Any]) -> dict[str, Any]:
        cwd = str(self.path(p["cwd"])) if "cwd" in p else str(self.root)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **p.get("env", {})}
        started = time.monotonic()
        if p.get("argv"):
            proc = await asyncio.create_subprocess_exec(
                *p["argv"], cwd=cwd, env=env, stdout=-1, stderr=-1
            )
        else:
            proc = await asyncio.create_subprocess_shell(
                p["command"], cwd=cwd, env=env, stdout=-1, stderr=-1
            )
        timed_out = False
        try:
            out, err = await asyncio.wait_for(proc.communicate(), p.get("timeout_seconds", 30))
        except TimeoutError:
            proc.kill()
            out, err = await proc.communicate()
            timed_out = True
        return {
            "stdout": out.decode(errors="replace"),
            "stderr": err.decode(errors="replace"),
            "exit_code": -1 if timed_out else proc.returncode,
            "timed_out": timed_out,
            "duration_seconds": time.monotonic() - started,
            "output_truncated": False,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hub", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--machine-id", default="shim-double")
    parser.add_argument("--max-concurrent", type=int, default=4)
    parser.add_argument("--commands-per-minute", type=int, default=60)
    parser.add_argument("--status-interval", type=float, default=30.0)
    return asyncio.run(StrictPeer(parser.parse_args()).run())


if __name__ == "__main__":
    raise SystemExit(main())
