"""Running native cases: an adapter process per case, the device it connects to, viewers.

The adapter is any `crossdesk-automation/1` command (`-- CMD ARGS...`);
Tetherbed's own is the default. It connects to a device: give yours with
--device and --password-file; for Tetherbed's own adapter the suite starts a
private Xvfb display, registers it as a device and keeps something moving on
it (video is only sent when pictures change). Each case starts its own
adapter process, so no case sees another's session, observations or
operation cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.case import Case, Context, Departure
from tetherbed.simulator.conformance.environment import TargetUnavailable
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.native.peer import NativePeer
from tetherbed.simulator.conformance.native.viewer import Viewer
from tetherbed.simulator.conformance.profiles import Profile
from tetherbed.wire import crossdesk

REFERENCE = (sys.executable, "-m", "tetherbed", "native", "--stdio", "--password-fd", "3",
             "--video-ws", "--quality", "low")  # fmt: skip
#: Tetherbed's own `doctor --json`.
REFERENCE_DOCTOR = (sys.executable, "-m", "tetherbed", "native", "doctor", "--json")
#: The origin the suite's panel claims (any loopback port will do).
ORIGIN = "http://127.0.0.1:5173"
READY_WAIT = 20.0


def token() -> str:
    """A 32-character base64url id, as tickets, views and sessions are."""
    return secrets.token_urlsafe(24)


class NativeContext(Context):
    def __init__(
        self, case: Case, evidence: Evidence, profile: Profile, environment: NativeEnvironment
    ) -> None:
        super().__init__(case, evidence, profile)
        self.environment = environment
        self.peers: list[NativePeer] = []
        self.viewers: list[Viewer] = []
        self.folder = Path(tempfile.mkdtemp(prefix=f"{case.id[:40]}-", dir=environment.base))

    @property
    def device(self) -> str:
        return self.environment.device

    async def adapter(self, *, password: str | bool | None = True) -> NativePeer:
        """A started adapter; `password` True for the device's, None to send none."""
        secret = self.environment.password if password is True else password
        peer = NativePeer(
            self.evidence,
            self.environment.argv,
            env=self.environment.env,
            password=secret if isinstance(secret, str) else None,
            log=self.folder / f"adapter-{len(self.peers) + 1}.log",
            name=f"adapter#{len(self.peers) + 1}",
        )
        try:
            await peer.start()
        except OSError as exc:
            raise TargetUnavailable(f"cannot start the adapter: {exc}") from None
        self.peers.append(peer)
        return peer

    async def connected(
        self, *, mode: str = "control", decode_path: str = "browser", **connect: Any
    ) -> NativePeer:
        """An adapter connected to the device, its status `ready`."""
        peer = await self.adapter()
        answer = await peer.call(
            "connect", device=self.device, mode=mode, display=self.environment.display_index,
            decode_path=decode_path, **connect,
        )  # fmt: skip
        if not answer.ok:
            self.depart(f"connect failed: {answer.describe()} {answer.error.get('message', '')}")
        await self.wait_ready(peer)
        return peer

    async def wait_ready(self, peer: NativePeer) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_WAIT
        while True:
            status = await peer.result("status")
            if status.get("state") == "ready":
                return status
            if status.get("state") == "failed" or loop.time() > deadline:
                raise Departure(f"status never became ready (state {status.get('state')!r})")
            await asyncio.sleep(0.1)

    async def video_capable(self, peer: NativePeer) -> dict[str, Any]:
        hello = await peer.result("hello", protocol=crossdesk.PROTOCOL)
        if hello.get(crossdesk.HELLO_VIDEO_TRANSPORT) != crossdesk.VIDEO_TRANSPORT:
            self.not_applicable("the adapter does not advertise loopback WebSocket video")
        return hello

    async def video(
        self, *, decode_path: str = "browser", viewers: int = 1, present: bool = True
    ) -> tuple[NativePeer, list[Viewer], dict[str, Any]]:
        """A connected adapter and `viewers` authorized viewers (ticket presented)."""
        peer = await self.connected(decode_path=decode_path)
        await self.video_capable(peer)
        made, opened = [], {}
        for _ in range(viewers):
            grant = {"ticket": token(), "view": token(), "view_generation": 1,
                     "session": token(), "origin": ORIGIN}  # fmt: skip
            opened = await peer.result("video_open", **grant)
            viewer = self.viewer()
            await viewer.open(str(opened.get("url")), ORIGIN)
            if present:
                await viewer.present(grant["ticket"])
            viewer.grant = grant  # type: ignore[attr-defined]
            made.append(viewer)
        return peer, made, opened

    def viewer(self) -> Viewer:
        viewer = Viewer(self.evidence, f"viewer#{len(self.viewers) + 1}")
        self.viewers.append(viewer)
        return viewer

    async def close(self) -> None:
        for viewer in self.viewers:
            await viewer.shutdown()
        for peer in self.peers:
            await peer.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class NativeEnvironment:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        device: str | None,
        password: str | None,
        display_index: int,
        reference: bool,
        doctor: Sequence[str] | None = None,
    ) -> None:
        self.argv = list(argv)
        #: The adapter's `doctor --json` command (None: not given; its cases skip).
        self.doctor = list(doctor) if doctor else None
        self.device = device or ""
        self.password = password or ""
        self.display_index = display_index
        self.reference = reference
        self.env: dict[str, str] = {}
        self.base = Path()
        self._xvfb: Any = None
        self._activity: subprocess.Popen[bytes] | None = None
        self.description = "Tetherbed's native adapter" if reference else f"adapter `{argv[0]}`"
        self.details: dict[str, Any] = {
            "command": " ".join(self.argv),
            "doctor command": " ".join(self.doctor) if self.doctor else "(none)",
        }

    async def start(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="tetherbed-conform-native-"))
        if not self.device:
            await self._own_device()
        self.details["device"] = self.device
        self.details["display index"] = str(self.display_index)

    async def _own_device(self) -> None:
        """A private Xvfb registered as a device, with something moving on it."""
        from tetherbed.agent.desktop.xvfb import XvfbDisplay

        self._xvfb = XvfbDisplay(1280, 720, 24)
        await asyncio.to_thread(self._xvfb.start)
        registry = self.base / "devices.json"
        self.env["TETHERBED_DEVICE_REGISTRY"] = str(registry)
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "tetherbed", "native", "device", "add", "--display",
             self._xvfb.name, "--registry", str(registry)],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        if done.returncode != 0:
            raise TargetUnavailable(f"cannot register the test display: {done.stderr.strip()}")
        added = json.loads(done.stdout)
        self.device, self.password = added["device"], added["password"]
        self._activity = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "tetherbed.simulator.peripherals.screen_activity",
             "--display", self._xvfb.name, "--fps", "20"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.details["display"] = f"{self._xvfb.name} (Xvfb 1280×720, kept moving)"

    async def stop(self) -> None:
        if self._activity is not None:
            self._activity.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self._activity.wait, 5)
            if self._activity.poll() is None:
                self._activity.kill()
        if self._xvfb is not None:
            await asyncio.to_thread(self._xvfb.stop)
        shutil.rmtree(self.base, ignore_errors=True)

    def applicable(self, case: Case) -> str | None:
        if "doctor" in case.needs and self.doctor is None:
            return "no doctor command for this adapter (--doctor-command)"
        return None

    @contextlib.asynccontextmanager
    async def context(
        self, case: Case, evidence: Evidence, profile: Profile
    ) -> AsyncIterator[NativeContext]:
        context = NativeContext(case, evidence, profile, self)
        try:
            yield context
        finally:
            await context.close()


def read_password(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError) as exc:
        raise ValueError(f"cannot read a password from {path}: {exc}") from None
