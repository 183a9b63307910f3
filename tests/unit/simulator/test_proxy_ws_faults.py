"""WebSocket message faults through the proxy, between a real `websockets` client and server."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import WSMsgType, web
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.proxy.registry import ProxyRegistry


def msg(kind: str, ident: str = "1", **payload: object) -> str:
    return json.dumps({"type": kind, "id": ident, "payload": payload})


class Hub:
    """Records what each connection received and the close code it ended with."""

    def __init__(self) -> None:
        self.received: asyncio.Queue[str | bytes] = asyncio.Queue()
        self.connections: asyncio.Queue[ServerConnection] = asyncio.Queue()
        self.close_codes: asyncio.Queue[int | None] = asyncio.Queue()

    async def handler(self, ws: ServerConnection) -> None:
        await self.connections.put(ws)
        try:
            async for message in ws:
                await self.received.put(message)
        except ConnectionClosed:
            pass
        finally:
            await self.close_codes.put(ws.close_code)

    async def next(self) -> str | bytes:
        return await asyncio.wait_for(self.received.get(), 5)

    async def types(self, count: int) -> list[str]:
        return [json.loads(await self.next())["type"] for _ in range(count)]


@pytest.fixture(params=[None, "deflate"], ids=["plain", "deflate-offered"])
async def setup(request) -> AsyncIterator[tuple[Hub, FaultProxy, str | None]]:
    hub = Hub()
    compression = request.param
    async with serve(hub.handler, "127.0.0.1", 0, compression=compression) as server:
        port = server.sockets[0].getsockname()[1]
        registry = ProxyRegistry(random.Random(3), close_timeout=1.0)
        proxy = await registry.create("hub", "127.0.0.1:0", f"127.0.0.1:{port}")
        yield hub, proxy, compression
        await registry.close()


async def client(proxy: FaultProxy, compression: str | None) -> ClientConnection:
    return await connect(
        f"ws://{proxy.listen}/ws/local-executor",
        ping_interval=None,
        compression=compression,
        proxy=None,
        open_timeout=5,
        close_timeout=2,
    )


async def test_messages_pass_untouched_without_rules(setup):
    hub, proxy, compression = setup
    async with await client(proxy, compression) as ws:
        await ws.send(msg("HELLO"))
        await ws.send(b"\x00\x01 binary")
        assert json.loads(await hub.next())["type"] == "HELLO"
        assert await hub.next() == b"\x00\x01 binary"
        server_side = await hub.connections.get()
        await server_side.send(msg("HELLO_ACK"))
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "HELLO_ACK"
    assert await asyncio.wait_for(hub.close_codes.get(), 5) == 1000
    assert proxy.connections() == [] or all(c["websocket"] for c in proxy.connections())


async def test_swallow_pongs(setup):
    hub, proxy, compression = setup
    proxy.add_rule("drop", stream="upstream", type="PONG")
    async with await client(proxy, compression) as ws:
        for kind in ["A", "PONG", "B", "PONG", "C"]:
            await ws.send(msg(kind))
        assert await hub.types(3) == ["A", "B", "C"]
    assert proxy.rules.get("drop_PONG_1").matched == 2


async def test_delay_by_type_lets_later_messages_overtake(setup):
    hub, proxy, compression = setup
    proxy.add_rule("delay", stream="downstream", type="FILE_CONTENTS", delay=500)
    async with await client(proxy, compression) as ws:
        server_side = await hub.connections.get()
        started = time.monotonic()
        await server_side.send(msg("FILE_CONTENTS", data="x" * 5000))
        await server_side.send(msg("ACK"))
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "ACK"
        contents = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert contents["type"] == "FILE_CONTENTS"
        assert contents["payload"]["data"] == "x" * 5000
        assert time.monotonic() - started >= 0.5


async def test_duplicate_the_next_execute_command(setup):
    hub, proxy, compression = setup
    proxy.add_rule("duplicate", stream="upstream", type="EXECUTE_COMMAND", count=1)
    async with await client(proxy, compression) as ws:
        await ws.send(msg("EXECUTE_COMMAND", "1", command="ls"))
        await ws.send(msg("EXECUTE_COMMAND", "2", command="pwd"))
        ids = [json.loads(await hub.next())["id"] for _ in range(3)]
        assert ids == ["1", "1", "2"]
        assert not list(proxy.rules)  # the count was used up


async def test_reorder_two_consecutive_messages(setup):
    hub, proxy, compression = setup
    proxy.add_rule("reorder", stream="upstream", type="A", count=1)
    async with await client(proxy, compression) as ws:
        for kind in ["A", "B", "C"]:
            await ws.send(msg(kind))
        assert await hub.types(3) == ["B", "A", "C"]


async def test_fragmented_messages_are_matched_and_duplicated_whole(setup):
    hub, proxy, compression = setup
    proxy.add_rule("duplicate", stream="upstream", type="BIG")
    body = msg("BIG", data="y" * 20000)
    async with await client(proxy, compression) as ws:
        await ws.send([body[:7], body[7:9000], body[9000:]])  # three frames
        assert await hub.next() == body
        assert await hub.next() == body


async def test_binary_messages_have_their_own_type(setup):
    hub, proxy, compression = setup
    proxy.add_rule("drop", type="ws.binary")
    async with await client(proxy, compression) as ws:
        await ws.send(b"\x00video")
        await ws.send(msg("STATUS"))
        assert json.loads(await hub.next())["type"] == "STATUS"


async def test_inject_close_4429_toward_the_agent(setup):
    hub, proxy, compression = setup
    ws = await client(proxy, compression)
    await ws.send(msg("HELLO"))
    await hub.next()
    assert proxy.inject_close("client", 4429, "rate limited") == 1
    with pytest.raises(ConnectionClosed) as closed:
        await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4429, "rate limited")
    # The hub was not told: its TCP connection just ended.
    assert await asyncio.wait_for(hub.close_codes.get(), 5) == 1006


async def test_inject_close_toward_the_hub(setup):
    hub, proxy, compression = setup
    ws = await client(proxy, compression)
    await ws.send(msg("HELLO"))
    await hub.next()
    assert proxy.inject_close("server", 4000, "gone") == 1
    assert await asyncio.wait_for(hub.close_codes.get(), 5) == 4000
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(ws.recv(), 5)


async def test_close_rule_answers_a_message_with_a_close(setup):
    hub, proxy, compression = setup
    proxy.add_rule("close", stream="upstream", type="HELLO", code=4429, toward="both")
    ws = await client(proxy, compression)
    await ws.send(msg("HELLO"))
    with pytest.raises(ConnectionClosed) as closed:
        await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4429
    assert await asyncio.wait_for(hub.close_codes.get(), 5) == 4429
    assert hub.received.empty()  # the HELLO itself never arrived


async def test_works_in_front_of_an_aiohttp_server_like_the_hub():
    """The hub serves WebSockets with aiohttp; its upgrade and frames parse too."""
    received: asyncio.Queue[str] = asyncio.Queue()

    async def endpoint(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=True)
        await ws.prepare(request)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await received.put(json.loads(message.data)["type"])
        return ws

    app = web.Application()
    app.router.add_get("/ws/local-executor", endpoint)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    registry = ProxyRegistry(random.Random(3))
    try:
        proxy = await registry.create("hub", "127.0.0.1:0", f"127.0.0.1:{port}")
        proxy.add_rule("drop", stream="upstream", type="PONG")
        ws = await client(proxy, "deflate")
        for kind in ["PONG", "STATUS"]:
            await ws.send(msg(kind))
        assert await asyncio.wait_for(received.get(), 5) == "STATUS"
        assert proxy.inject_close("client", 4429, "") == 1
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4429
    finally:
        await registry.close()
        await runner.cleanup()
