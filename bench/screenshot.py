"""Screenshot benchmark: SCREENSHOT_REQUEST at 1920x1080 JPEG q75 against the scrot + convert path.

Measured in the same run, interleaved round by round, on one Xvfb display
showing a busy desktop-like picture (text, gradients, shapes - a blank screen
would make every JPEG trivially small):

* ``tetherbed``: a SCREENSHOT_REQUEST {format: jpeg, quality: 75} round trip
  through a real hub and agent (``start_hub`` / ``start_agent`` with the
  agent's DISPLAY set to the Xvfb display, client ``HubSandbox.request``).
  Until the agent advertises computer use, the hub cannot route the request;
  the bench then says so and measures the in-process ``ComputerUse.run`` path
  (capture, encode, size check, base64) instead. ``--path`` forces either.
* ``scrot+convert``: what common computer-use demo containers do - ``scrot``
  to a PNG, ImageMagick ``convert`` to JPEG q75, read the bytes, base64.

Prints median and p90 of each and the ratio baseline / tetherbed (how many
times faster). Never asserts; the exit status is 0 whatever the numbers.

    .venv/bin/python bench/screenshot.py [--rounds 30] [--path auto|hub|inprocess] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tetherbed.agent.desktop.xvfb import XvfbDisplay

WIDTH, HEIGHT = 1920, 1080
QUALITY = 75
SESSION_ID = "sess-screenshot-bench"
#: Codes with which the hub or agent says "this agent has no computer use (yet)".
NOT_WIRED = {
    "CAPABILITY_NOT_GRANTED",
    "FEATURE_NOT_SUPPORTED",
    "MESSAGE_NOT_ALLOWED",
    "UNKNOWN_MESSAGE_TYPE",
}


@dataclass
class Series:
    name: str
    seconds: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    note: str = ""

    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    def p90_ms(self) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))] * 1000


# --- a busy screen -------------------------------------------------------------------


def desktop_picture(path: Path) -> None:
    """A PNG that compresses like a real desktop: text panes, gradients, photo-ish noise."""
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(7)
    image = Image.new("RGB", (WIDTH, HEIGHT))
    draw = ImageDraw.Draw(image)
    for y in range(HEIGHT):  # wallpaper gradient
        draw.line([(0, y), (WIDTH, y)], fill=(20 + y // 8, 40 + y // 12, 90 + y // 9))
    for _ in range(6):  # windows full of text
        x0, y0 = rng.randrange(0, WIDTH - 700), rng.randrange(0, HEIGHT - 500)
        draw.rectangle([x0, y0, x0 + 700, y0 + 500], fill=(250, 250, 246), outline=(60, 60, 60))
        draw.rectangle([x0, y0, x0 + 700, y0 + 28], fill=(70, 90, 140))
        for line in range(30):
            words = " ".join(
                "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                for _ in range(rng.randint(4, 11))
            )
            color = (rng.randint(0, 90), rng.randint(0, 90), rng.randint(0, 140))
            draw.text((x0 + 12, y0 + 36 + line * 15), words, fill=color)
    for _ in range(40):  # icons and buttons
        x, y = rng.randrange(0, WIDTH - 64), rng.randrange(0, HEIGHT - 64)
        fill = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        draw.rounded_rectangle([x, y, x + 56, y + 56], radius=10, fill=fill)
    photo = Image.effect_noise((480, 320), 60).convert("RGB")  # a "photo" viewer
    image.paste(photo, (WIDTH - 520, HEIGHT - 380))
    image.save(path)


FILLER = """
import sys, tkinter as tk
root = tk.Tk()
root.overrideredirect(True)
root.geometry(f"{sys.argv[2]}x{sys.argv[3]}+0+0")
picture = tk.PhotoImage(file=sys.argv[1])
tk.Label(root, image=picture, borderwidth=0).pack()
root.after(100, lambda: print("shown", flush=True))
root.mainloop()
"""


@contextlib.contextmanager
def busy_screen(display: str, workdir: Path) -> Iterator[None]:
    picture = workdir / "desktop.png"
    desktop_picture(picture)
    proc = subprocess.Popen(
        [sys.executable, "-c", FILLER, str(picture), str(WIDTH), str(HEIGHT)],
        env={**os.environ, "DISPLAY": display},
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"shown":
            raise RuntimeError("the screen filler did not start")
        time.sleep(0.3)  # let Tk finish painting
        yield
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# --- the baseline: scrot + convert ------------------------------------------------------


def scrot_convert(display: str, workdir: Path) -> int:
    """One capture the demo-container way; returns the JPEG's size."""
    png, jpg = workdir / "shot.png", workdir / "shot.jpg"
    env = {**os.environ, "DISPLAY": display}
    subprocess.run(["scrot", "-o", str(png)], env=env, check=True, capture_output=True)
    subprocess.run(
        ["convert", str(png), "-quality", str(QUALITY), str(jpg)], check=True, capture_output=True
    )
    data = jpg.read_bytes()
    base64.b64encode(data)
    return len(data)


# --- tetherbed: through the hub, or in process -------------------------------------------


async def in_process_shooter(display: str) -> tuple[Callable[[], Awaitable[int]], Any]:
    from tetherbed.agent.computer_use.service import ComputerUse
    from tetherbed.runtime.clock import SystemClock
    from tetherbed.wire.messages import MessageType, ScreenshotRequest

    cu = ComputerUse(display, clock=SystemClock(), include_desktop_files=False)
    request = ScreenshotRequest(format="jpeg", quality=QUALITY, include_cursor=True)

    async def shoot() -> int:
        _, response = await cu.run(MessageType.SCREENSHOT_REQUEST, request)
        return len(response.image_base64) * 3 // 4  # type: ignore[attr-defined]

    return shoot, cu.close


@contextlib.asynccontextmanager
async def hub_stack(display: str, workdir: Path) -> Any:
    """A real hub and agent on loopback, the agent on `display`; yields a client."""
    from tetherbed.client.sandbox import HubSandbox
    from tetherbed.launch import start_agent, start_hub

    os.environ["DISPLAY"] = display  # start_agent passes its environment on
    hub = start_hub(workdir / "hub")
    agent = None
    try:
        agent_token, client_token = hub.token("bench", "agent"), hub.token("bench", "client")
        root = workdir / "root"
        root.mkdir(exist_ok=True)
        agent = start_agent(hub.url, agent_token, root, SESSION_ID)
        await asyncio.to_thread(hub.wait_connected, client_token, SESSION_ID)
        async with HubSandbox.connect(
            hub.url, SESSION_ID, client_token, request_timeout=30
        ) as sandbox:
            yield sandbox
    finally:
        if agent is not None:
            agent.stop()
        hub.stop()


def hub_shooter(sandbox: Any) -> Callable[[], Awaitable[int]]:
    from tetherbed.wire.messages import MessageType

    payload = {"format": "jpeg", "quality": QUALITY, "monitor": 0, "include_cursor": True}

    async def shoot() -> int:
        frame = await sandbox.request(MessageType.SCREENSHOT_REQUEST, payload)
        return len(frame.payload.image_base64) * 3 // 4

    return shoot


async def hub_is_wired(shoot: Callable[[], Awaitable[int]]) -> str | None:
    """None if a SCREENSHOT_REQUEST gets through; else why not."""
    from tetherbed.client.errors import HubError

    try:
        await shoot()
    except HubError as exc:
        if exc.code in NOT_WIRED:
            return f"{exc.code}: {exc.message}"
        raise
    return None


# --- the run ----------------------------------------------------------------------------


async def measure(
    rounds: int, ours: Series, shoot: Callable[[], Awaitable[int]], base: Series, display: str
) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="scrot-"))
    try:
        for _ in range(3):  # warm up both: imports, connections, page cache
            await shoot()
            await asyncio.to_thread(scrot_convert, display, workdir)
        for i in range(rounds):
            for which in ("ours", "base") if i % 2 == 0 else ("base", "ours"):
                started = time.perf_counter()
                if which == "ours":
                    size = await shoot()
                    ours.seconds.append(time.perf_counter() - started)
                    ours.sizes.append(size)
                else:
                    size = await asyncio.to_thread(scrot_convert, display, workdir)
                    base.seconds.append(time.perf_counter() - started)
                    base.sizes.append(size)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    for tool in ("scrot", "convert", "Xvfb"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (make test installs it)")
    base = Series("scrot+convert")
    workdir = Path(tempfile.mkdtemp(prefix="screenshot-bench-"))
    try:
        with XvfbDisplay(WIDTH, HEIGHT, 24) as xvfb, busy_screen(xvfb.name, workdir):
            ours = await run_ours(args, xvfb.name, workdir, base)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"ours": ours, "base": base}


async def run_ours(args: argparse.Namespace, display: str, workdir: Path, base: Series) -> Series:
    if args.path in ("auto", "hub"):
        async with hub_stack(display, workdir) as sandbox:
            shoot = hub_shooter(sandbox)
            why_not = await hub_is_wired(shoot)
            if why_not is None:
                ours = Series("tetherbed via hub+agent")
                await measure(args.rounds, ours, shoot, base, display)
                return ours
            if args.path == "hub":
                raise SystemExit(f"the agent does not answer SCREENSHOT_REQUEST yet: {why_not}")
            note = f"hub path not available yet ({why_not}); measured in process"
    else:
        note = "in process (--path inprocess)"
    shoot, close = await in_process_shooter(display)
    try:
        ours = Series("tetherbed ComputerUse.run", note=note)
        await measure(args.rounds, ours, shoot, base, display)
    finally:
        await close()
    return ours


def report(result: dict[str, Series], as_json: bool) -> None:
    ours, base = result["ours"], result["base"]
    ratio = base.median_ms() / ours.median_ms()
    if as_json:
        out = {
            k: {**asdict(v), "median_ms": v.median_ms(), "p90_ms": v.p90_ms()}
            for k, v in result.items()
        }
        print(json.dumps({**out, "ratio_base_over_ours": ratio}, indent=2))
        return
    load = os.getloadavg()[0]
    rounds = len(ours.seconds)
    print(f"SCREENSHOT {WIDTH}x{HEIGHT} JPEG q{QUALITY}, {rounds} rounds, load {load:.2f}")
    if ours.note:
        print(f"  note: {ours.note}")
    print(f"  {'path':32} {'median ms':>10} {'p90 ms':>10} {'JPEG bytes':>11}")
    for series in (ours, base):
        size = int(statistics.median(series.sizes))
        print(f"  {series.name:32} {series.median_ms():10.1f} {series.p90_ms():10.1f} {size:11d}")
    print(f"  ratio scrot+convert / tetherbed (median): {ratio:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--path", choices=("auto", "hub", "inprocess"), default="auto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
