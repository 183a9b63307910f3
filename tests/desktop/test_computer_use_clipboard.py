"""CLIPBOARD_READ/WRITE policy, `type` with paste, and PERMISSIONS_CHECK, on a real display."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.desktop.conftest import ProbeApp
from tests.desktop.helpers import clear_entry
from tetherbed.agent.computer_use.service import ComputerUse
from tetherbed.agent.config import Limits
from tetherbed.agent.desktop.clipboard import ClipboardOwner
from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    Ack,
    ClipboardReadResponse,
    ClipboardWrite,
    Empty,
    InputAction,
    MessageType,
    PermissionsCheckResponse,
)

pytestmark = pytest.mark.xvfb


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def opted_in(xvfb: XvfbDisplay, clock: ManualClock) -> AsyncIterator[ComputerUse]:
    cu = ComputerUse(
        xvfb.name,
        clock=clock,
        clipboard_read_opt_in=True,
        limits_provider=lambda: Limits(max_file_size_bytes=1000),
    )
    try:
        yield cu
    finally:
        await cu.close()


@pytest.fixture
def user_app(xvfb: XvfbDisplay) -> Iterator[ClipboardOwner]:
    """Another client on the display that copies things, like a user's editor."""
    owner = ClipboardOwner(xvfb.name)
    yield owner
    owner.close()


async def write(cu: ComputerUse, text: str) -> None:
    assert await cu.run(MessageType.CLIPBOARD_WRITE, ClipboardWrite(text=text)) == (
        MessageType.ACK,
        Ack(ok=True),
    )


async def read(cu: ComputerUse) -> str:
    kind, response = await cu.run(MessageType.CLIPBOARD_READ, Empty())
    assert kind is MessageType.CLIPBOARD_READ_RESPONSE
    assert isinstance(response, ClipboardReadResponse)
    return response.text


async def concealed(cu: ComputerUse) -> str:
    with pytest.raises(ProtocolError) as caught:
        await read(cu)
    assert caught.value.code == "CLIPBOARD_CONCEALED"
    return caught.value.message


async def test_default_write_is_real_and_read_is_concealed(
    computer_use: ComputerUse, probe_app: ProbeApp, user_app: ClipboardOwner
) -> None:
    await write(computer_use, "from the agent ✓")
    assert "disabled" in await concealed(computer_use)
    assert user_app.read_current() == "from the agent ✓"  # other apps see it
    clear_entry(computer_use.session.input, probe_app)
    mark = probe_app.events.mark()
    computer_use.session.input.key("ctrl+v")
    probe_app.events.wait_for(
        lambda e: e["type"] == "text" and e["text"] == "from the agent ✓", since=mark
    )


async def test_opt_in_reads_back_only_the_agents_recent_text(
    opted_in: ComputerUse, clock: ManualClock, user_app: ClipboardOwner
) -> None:
    assert "not written" in await concealed(opted_in)
    await write(opted_in, "mine")
    assert await read(opted_in) == "mine"
    clock.advance(29)
    assert await read(opted_in) == "mine"
    clock.advance(2)
    assert "older than 30 s" in await concealed(opted_in)
    await write(opted_in, "mine again")
    user_app.write("the user's password")
    assert "changed" in await concealed(opted_in)


async def test_clipboard_write_over_the_limit(opted_in: ComputerUse) -> None:
    with pytest.raises(ProtocolError) as caught:
        await write(opted_in, "é" * 501)  # 1002 UTF-8 bytes
    assert caught.value.code == "FILE_TOO_LARGE"
    assert caught.value.details == {"size_bytes": 1002, "max_file_size_bytes": 1000}


async def test_paste_preserving_the_users_clipboard(
    opted_in: ComputerUse, probe_app: ProbeApp, user_app: ClipboardOwner
) -> None:
    user_app.write("the user's text")
    clear_entry(opted_in.session.input, probe_app)
    mark = probe_app.events.mark()
    action = InputAction(action="type", text="pasted 日本", paste=True, preserve_clipboard=True)
    await opted_in.run(MessageType.INPUT_ACTION, action)
    probe_app.events.wait_for(
        lambda e: e["type"] == "text" and e["text"] == "pasted 日本", since=mark
    )
    assert user_app.read_current() == "the user's text"
    await concealed(opted_in)  # restored text is the user's, never readable


async def test_paste_without_preserving_counts_as_the_agents_write(
    opted_in: ComputerUse, probe_app: ProbeApp
) -> None:
    clear_entry(opted_in.session.input, probe_app)
    action = InputAction(action="type", text="left behind", paste=True)
    await opted_in.run(MessageType.INPUT_ACTION, action)
    assert await read(opted_in) == "left behind"


async def test_permissions(computer_use: ComputerUse, opted_in: ComputerUse) -> None:
    for cu, clipboard_read in ((computer_use, "denied"), (opted_in, "own_writes_only")):
        kind, response = await cu.run(MessageType.PERMISSIONS_CHECK_REQUEST, Empty())
        assert kind is MessageType.PERMISSIONS_CHECK_RESPONSE
        assert isinstance(response, PermissionsCheckResponse)
        assert response.permissions == {
            "screen_recording": "granted",
            "accessibility": "granted",
            "clipboard_read": clipboard_read,
            "clipboard_write": "granted",
        }


async def test_big_text_is_served_incrementally(
    computer_use: ComputerUse, xvfb: XvfbDisplay
) -> None:
    """Over 128 KiB the owner speaks INCR; Tk, like most toolkits, reads it back whole."""
    text = "0123456789abcdef✓" * 20_000  # 340,000 characters, 380,000 UTF-8 bytes
    await write(computer_use, text)
    reader = (
        "import hashlib, tkinter; text = tkinter.Tk().clipboard_get(); "
        "print(len(text), hashlib.sha256(text.encode()).hexdigest())"
    )
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", reader],
        env={**os.environ, "DISPLAY": xvfb.name},
        capture_output=True,
        text=True,
        timeout=60,
    )
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert out.stdout.split() == [str(len(text)), digest], out.stderr
