"""Dispatcher concurrency and cancel, the bounded output queue, the device registry."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.native.devices import lookup_device, register_device
from tetherbed.agent.native.dispatch import Dispatcher
from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.main import main_device
from tetherbed.agent.native.output import OutputBudget, OutputQueue
from tetherbed.agent.native.protocol import Request


class SlowAdapter:
    """Answers `status` after `delay` seconds taken from a field-less request id table."""

    def __init__(self, delays: dict[int, float]) -> None:
        self.delays = delays
        self.cancelled: list[int] = []

    async def handle(self, request: Request) -> Any:
        await asyncio.sleep(self.delays.get(request.id, 0))
        if request.method == "display":
            raise NativeError(Code.NOT_CONNECTED, "no")
        return {"id_was": request.id}

    def note_cancel(self, request_id: int, code: Code) -> None:
        self.cancelled.append(request_id)


async def test_out_of_order_completion_and_cancel() -> None:
    sent: list[dict[str, Any]] = []

    async def send(data: bytes) -> None:
        sent.append(json.loads(data))

    dispatcher = Dispatcher(SlowAdapter({1: 0.3, 2: 0.0, 3: 5.0}), send)
    await dispatcher.on_line(b'{"id":1,"method":"status"}')
    await dispatcher.on_line(b'{"id":2,"method":"status"}')
    await dispatcher.on_line(b'{"id":3,"method":"status"}')
    await dispatcher.on_line(b'{"id":3,"method":"status"}')
    await dispatcher.on_line(b'{"id":4,"method":"display","index":0}')
    await asyncio.sleep(0.5)
    await dispatcher.on_line(b'{"id":5,"method":"cancel","request_id":3}')
    await asyncio.sleep(0.05)
    ids = [m["id"] for m in sent]
    assert ids.index(2) < ids.index(1)  # the later request finished first
    assert sent[ids.index(3)]["error"]["code"] == "DUPLICATE_REQUEST_ID"
    assert sent[ids.index(4)]["error"]["code"] == "NOT_CONNECTED"
    assert {"id": 5, "ok": True, "result": {"cancelled": True}} in sent
    cancelled = [m for m in sent if m["id"] == 3 and not m["ok"]][-1]
    assert cancelled["error"]["code"] == "CANCELLED"
    await dispatcher.close()


async def test_work_in_flight_is_bounded_and_stops_the_reader() -> None:
    """With every answer stuck (nobody reads stdout), the next line waits for a slot."""
    stuck = asyncio.Event()
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        await stuck.wait()
        sent.append(data)

    dispatcher = Dispatcher(SlowAdapter({}), send, max_in_flight=3)
    for i in range(3):
        await dispatcher.on_line(b'{"id":%d,"method":"status"}' % i)
    fourth = asyncio.ensure_future(dispatcher.on_line(b'{"id":9,"method":"status"}'))
    await asyncio.sleep(0.1)
    assert not fourth.done() and dispatcher.in_flight == 3
    stuck.set()  # the caller reads again
    await asyncio.wait_for(fourth, 1)
    await asyncio.sleep(0.05)
    assert len(sent) == 4 and dispatcher.in_flight == 0
    await dispatcher.close()


async def test_closing_releases_the_slots_of_cancelled_requests() -> None:
    async def send(data: bytes) -> None:
        return None

    dispatcher = Dispatcher(SlowAdapter({1: 60, 2: 60}), send, max_in_flight=2)
    await dispatcher.on_line(b'{"id":1,"method":"status"}')
    await dispatcher.on_line(b'{"id":2,"method":"status"}')
    await dispatcher.close()
    assert dispatcher.in_flight == 0 and dispatcher._slots._value == 2


def test_output_budget() -> None:
    budget = OutputBudget(max_messages=2, max_bytes=100)
    assert budget.fits(1000)  # a lone message always fits
    budget.add(60)
    assert budget.fits(40) and not budget.fits(41)
    budget.add(10)
    assert not budget.fits(1)
    budget.remove(60)
    assert budget.fits(90)


async def test_output_queue_backpressure_and_stall() -> None:
    read_fd, write_fd = os.pipe()
    stalled = asyncio.Event()
    queue = OutputQueue(
        write_fd,
        on_stall=stalled.set,
        stall_seconds=1.0,
        budget=OutputBudget(max_messages=4, max_bytes=1 << 30),
    )
    chunk = b"x" * 65536 + b"\n"
    for _ in range(4):
        await queue.put(chunk)  # the pipe holds ~1, the queue the rest
    blocked = asyncio.create_task(queue.put(chunk))
    await asyncio.sleep(0.3)
    assert not blocked.done()  # full: the producer waits instead of growing memory
    await asyncio.wait_for(stalled.wait(), 5)  # and nothing moves for a second
    os.read(read_fd, 1 << 20)
    queue.close()
    blocked.cancel()
    os.close(read_fd)
    os.close(write_fd)


def test_registry_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = tmp_path / "sub" / "devices.json"
    device_id, password = register_device(registry, ":42")
    assert len(device_id) == 9 and device_id.isdigit() and len(password) == 6
    device = lookup_device(registry, device_id)
    assert device is not None and device.display == ":42"
    assert device.check(password) and not device.check(password.upper() + "x")
    assert password not in registry.read_text()
    assert lookup_device(registry, "000000000") is None
    assert main_device(["add", "--display", ":43", "--registry", str(registry)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["display"] == ":43" and lookup_device(registry, printed["device"])
    assert oct(registry.stat().st_mode & 0o777) == "0o600"


def test_registry_env_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHERBED_DEVICE_REGISTRY", str(tmp_path / "env.json"))
    device_id, _ = register_device(None, ":5")
    assert lookup_device(None, device_id) is not None
