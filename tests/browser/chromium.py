"""Headless Chromium (the Debian package) driven over the DevTools protocol.

Started by the test in its own process group with a throwaway profile and
stopped by PID. Clicks and typing are real input events (Input.dispatch*),
so the page's own handlers run as they would for a person.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect


class BrowserError(RuntimeError):
    pass


class Chromium:
    def __init__(self, width: int = 1280, height: int = 860) -> None:
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if browser is None:
            raise BrowserError("Chromium is needed: install the Debian package `chromium`")
        self.profile = Path(tempfile.mkdtemp(prefix="tb-chromium-"))
        self.process = subprocess.Popen(
            [
                browser,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "--lang=en-US",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.size = (width, height)
        self._ws: ClientConnection | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.console: list[str] = []

    @property
    def pid(self) -> int:
        return self.process.pid

    def _port(self, timeout: float = 30) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrowserError(f"Chromium exited with {self.process.returncode}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.05)
        raise BrowserError("Chromium did not open its DevTools port")

    async def start(self) -> None:
        port = await asyncio.to_thread(self._port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            pages = [t for t in json.load(answer) if t.get("type") == "page"]
        if not pages:
            raise BrowserError("Chromium has no page target")
        self._ws = await connect(pages[0]["webSocketDebuggerUrl"], max_size=None, compression=None)
        self._reader = asyncio.ensure_future(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        width, height = self.size
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    async def _read(self) -> None:
        assert self._ws is not None
        async for raw in self._ws:
            message = json.loads(raw)
            waiter = self._waiting.pop(message.get("id"), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
            elif message.get("method") == "Runtime.consoleAPICalled":
                args = message["params"].get("args", [])
                self.console.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in args)
                )
            elif message.get("method") == "Runtime.exceptionThrown":
                self.console.append("exception: " + json.dumps(message["params"])[:500])

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self._ws is not None
        number = next(self._ids)
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[number] = waiter
        await self._ws.send(json.dumps({"id": number, "method": method, "params": params or {}}))
        answer = await asyncio.wait_for(waiter, 30)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", {"url": url})
        await self.wait_for("document.readyState === 'complete'")

    async def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll `expression` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression!r}; console: {self.console}")
            await asyncio.sleep(0.05)

    async def click(self, selector: str) -> None:
        """A real mouse click at the middle of the element."""
        box = await self.wait_for(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (!el) return null; el.scrollIntoView({block: 'center'});"
            " const r = el.getBoundingClientRect(); if (!r.width || !r.height) return null;"
            " return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1},
            )

    async def type(self, text: str) -> None:
        await self.send("Input.insertText", {"text": text})

    async def press(self, key: str, code: str, key_code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            await self.send(
                "Input.dispatchKeyEvent",
                {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code},
            )

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
        self.stop()

    def stop(self) -> None:
        """Stop the browser by PID (its whole process group), then drop the profile."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)
