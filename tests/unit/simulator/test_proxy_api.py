"""The Toxiproxy-compatible HTTP API and Tetherbed's fault endpoints, via plain HTTP."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tetherbed.simulator.proxy.registry import ProxyRegistry
from tetherbed.simulator.proxy.server import ApiServer


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


class Api:
    def __init__(self, session: aiohttp.ClientSession, base: str, upstream: str) -> None:
        self.session = session
        self.base = base
        self.upstream = upstream

    async def call(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        async with self.session.request(method, self.base + path, json=body) as response:
            text = await response.text()
            data = await response.json(content_type=None) if text else None
            return response.status, data


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    upstream = f"127.0.0.1:{echo.sockets[0].getsockname()[1]}"
    registry = ProxyRegistry(random.Random(5))
    server = ApiServer(registry, "127.0.0.1", 0)
    address = await server.start()
    async with aiohttp.ClientSession() as session:
        yield Api(session, f"http://{address}", upstream)
    await server.stop()
    await registry.close()
    echo.close()


async def echo_time(listen: str, data: bytes = b"ping") -> float:
    host, port = listen.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    started = time.monotonic()
    writer.write(data)
    assert await asyncio.wait_for(reader.readexactly(len(data)), 10) == data
    writer.close()
    return time.monotonic() - started


async def create(api: Api, name: str = "redis") -> dict:
    status, proxy = await api.call(
        "POST", "/proxies", {"name": name, "listen": "127.0.0.1:0", "upstream": api.upstream}
    )
    assert status == 201
    assert isinstance(proxy, dict)
    return proxy


# -- Toxiproxy API ----------------------------------------------------------------


async def test_proxy_lifecycle_in_toxiproxy_shapes(api):
    proxy = await create(api)
    assert proxy["name"] == "redis"
    assert proxy["upstream"] == api.upstream
    assert proxy["enabled"] is True
    assert proxy["toxics"] == []
    assert proxy["listen"].startswith("127.0.0.1:") and not proxy["listen"].endswith(":0")
    assert await echo_time(proxy["listen"]) >= 0

    assert await api.call("GET", "/proxies") == (200, {"redis": proxy})
    assert await api.call("GET", "/proxies/redis") == (200, proxy)
    status, error = await api.call(
        "POST", "/proxies", {"name": "redis", "listen": "127.0.0.1:0", "upstream": api.upstream}
    )
    assert status == 409 and error["status"] == 409 and "already exists" in error["error"]

    assert (await api.call("DELETE", "/proxies/redis"))[0] == 204
    status, error = await api.call("GET", "/proxies/redis")
    assert status == 404 and error == {"error": "proxy not found: redis", "status": 404}
    with pytest.raises(ConnectionRefusedError):
        await echo_time(proxy["listen"])


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"}, 400),  # no name
        ({"name": "x", "listen": "127.0.0.1:0"}, 400),  # no upstream
        ({"name": "x", "upstream": "nowhere"}, 400),  # not HOST:PORT
        ("not an object", 400),
    ],
)
async def test_proxy_create_errors(api, body, status):
    code, error = await api.call("POST", "/proxies", body)
    assert code == status and error["status"] == status


async def test_bad_json_is_400(api):
    async with api.session.post(api.base + "/proxies", data=b"{nope") as response:
        assert response.status == 400
        assert (await response.json())["error"].startswith("bad request body")


async def test_disable_and_enable_by_posting_enabled(api):
    proxy = await create(api)
    status, updated = await api.call("POST", "/proxies/redis", {"enabled": False})
    assert status == 200 and updated["enabled"] is False
    with pytest.raises(ConnectionRefusedError):
        await echo_time(proxy["listen"])
    status, updated = await api.call("PATCH", "/proxies/redis", {"enabled": True})
    assert updated["enabled"] is True and updated["listen"] == proxy["listen"]
    assert await echo_time(proxy["listen"]) >= 0


async def test_toxic_crud_in_toxiproxy_shapes(api):
    proxy = await create(api)
    status, toxic = await api.call(
        "POST", "/proxies/redis/toxics", {"type": "latency", "attributes": {"latency": 250}}
    )
    assert status == 200
    assert toxic == {
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1.0,
        "attributes": {"latency": 250, "jitter": 0},
    }
    assert await echo_time(proxy["listen"]) >= 0.25
    assert await api.call("GET", "/proxies/redis/toxics") == (200, [toxic])
    assert await api.call("GET", "/proxies/redis/toxics/latency_downstream") == (200, toxic)
    assert (await api.call("GET", "/proxies/redis"))[1]["toxics"] == [toxic]

    status, error = await api.call("POST", "/proxies/redis/toxics", {"type": "latency"})
    assert status == 409 and error["status"] == 409

    status, changed = await api.call(
        "POST", "/proxies/redis/toxics/latency_downstream", {"attributes": {"latency": 10}}
    )
    assert status == 200 and changed["attributes"] == {"latency": 10, "jitter": 0}

    assert (await api.call("DELETE", "/proxies/redis/toxics/latency_downstream"))[0] == 204
    status, error = await api.call("GET", "/proxies/redis/toxics/latency_downstream")
    assert status == 404 and error["status"] == 404
    assert (await api.call("DELETE", "/proxies/redis/toxics/latency_downstream"))[0] == 404


@pytest.mark.parametrize(
    "body",
    [
        {"type": "gremlins"},
        {"type": "latency", "stream": "sideways"},
        {"type": "latency", "toxicity": "high"},
        {"type": "bandwidth", "attributes": {"rate": "fast"}},
    ],
)
async def test_toxic_errors_are_400(api, body):
    await create(api)
    status, error = await api.call("POST", "/proxies/redis/toxics", body)
    assert status == 400 and error["status"] == 400


async def test_toxics_on_unknown_proxy_are_404(api):
    assert (await api.call("GET", "/proxies/nope/toxics"))[0] == 404
    assert (await api.call("POST", "/proxies/nope/toxics", {"type": "latency"}))[0] == 404


@pytest.mark.parametrize(
    ("kind", "attributes"),
    [
        ("bandwidth", {"rate": 1}),
        ("slow_close", {"delay": 10}),
        ("timeout", {"timeout": 10}),
        ("reset_peer", {"timeout": 10}),
        ("slicer", {"average_size": 10, "size_variation": 2, "delay": 10}),
        ("limit_data", {"bytes": 10}),
    ],
)
async def test_every_toxic_type_is_accepted(api, kind, attributes):
    await create(api)
    status, toxic = await api.call(
        "POST",
        "/proxies/redis/toxics",
        {"type": kind, "stream": "upstream", "toxicity": 0.5, "attributes": attributes},
    )
    assert status == 200
    assert toxic["name"] == f"{kind}_upstream" and toxic["toxicity"] == 0.5
    assert toxic["attributes"] == toxic["attributes"] | attributes


async def test_reset_enables_everything_and_removes_all_faults(api):
    proxy = await create(api)
    await api.call("POST", "/proxies/redis/toxics", {"type": "latency", "attributes": {}})
    await api.call("POST", "/proxies/redis/partition", {"stream": "upstream"})
    await api.call("POST", "/proxies/redis/ws/rules", {"action": "drop", "type": "PONG"})
    await api.call("POST", "/proxies/redis", {"enabled": False})
    assert (await api.call("POST", "/reset"))[0] == 204
    _, after = await api.call("GET", "/proxies/redis")
    assert after["enabled"] is True and after["toxics"] == []
    assert (await api.call("GET", "/proxies/redis/partition"))[1] == {
        "upstream": None,
        "downstream": None,
    }
    assert (await api.call("GET", "/proxies/redis/ws/rules"))[1] == []
    assert await echo_time(proxy["listen"]) >= 0


async def test_populate_creates_and_keeps(api):
    body = [{"name": "a", "listen": "127.0.0.1:0", "upstream": api.upstream}]
    status, result = await api.call("POST", "/populate", body)
    assert status == 201 and [p["name"] for p in result["proxies"]] == ["a"]
    listen = result["proxies"][0]["listen"]
    body[0]["listen"] = listen
    status, again = await api.call("POST", "/populate", body)
    assert again["proxies"][0]["listen"] == listen


async def test_version(api):
    status, body = await api.call("GET", "/version")
    assert status == 200 and body["version"].startswith("tetherbed-")


# -- Tetherbed endpoints ------------------------------------------------------------


async def test_partition_endpoints(api):
    proxy = await create(api)
    status, state = await api.call(
        "POST", "/proxies/redis/partition", {"stream": "both", "mode": "hold"}
    )
    assert status == 200
    assert state == {
        "upstream": {"mode": "hold", "timeout": 0},
        "downstream": {"mode": "hold", "timeout": 0},
    }
    task = asyncio.create_task(echo_time(proxy["listen"]))
    await asyncio.sleep(0.3)
    assert not task.done()
    assert (await api.call("DELETE", "/proxies/redis/partition"))[0] == 204
    await asyncio.wait_for(task, 10)  # the echo comes back once healed
    status, error = await api.call("POST", "/proxies/redis/partition", {"mode": "sometimes"})
    assert status == 400 and error["status"] == 400


async def test_connection_reset_endpoint(api):
    proxy = await create(api)
    host, port = proxy["listen"].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"x")
    await reader.readexactly(1)
    status, connections = await api.call("GET", "/proxies/redis/connections")
    assert status == 200 and len(connections) == 1
    assert await api.call("POST", "/proxies/redis/connections/reset") == (200, {"reset": 1})
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(), 5)


async def test_ws_rule_endpoints_and_close_injection(api):
    async def hub(ws: ServerConnection) -> None:
        async for message in ws:
            await ws.send(message)

    async with serve(hub, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        status, proxy = await api.call(
            "POST",
            "/proxies",
            {"name": "hub", "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{port}"},
        )
        status, rule = await api.call(
            "POST",
            "/proxies/hub/ws/rules",
            {"action": "drop", "stream": "downstream", "type": "PONG", "count": 1},
        )
        assert status == 200
        assert rule["name"] == "drop_PONG_1" and rule["count"] == 1 and rule["matched"] == 0
        assert await api.call("GET", "/proxies/hub/ws/rules/drop_PONG_1") == (200, rule)
        status, error = await api.call("POST", "/proxies/hub/ws/rules", {"action": "smash"})
        assert status == 400 and error["status"] == 400

        ws = await connect(f"ws://{proxy['listen']}/ws", ping_interval=None, proxy=None)
        await ws.send('{"type":"PONG"}')
        await ws.send('{"type":"OTHER"}')
        assert await asyncio.wait_for(ws.recv(), 5) == '{"type":"OTHER"}'
        assert (await api.call("GET", "/proxies/hub/ws/rules"))[1] == []  # used up
        assert (await api.call("DELETE", "/proxies/hub/ws/rules/drop_PONG_1"))[0] == 404

        status, result = await api.call(
            "POST", "/proxies/hub/ws/close", {"toward": "client", "code": 4429, "reason": "slow"}
        )
        assert (status, result) == (200, {"connections": 1})
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4429
        assert (await api.call("POST", "/proxies/hub/ws/close", {"toward": "client"}))[0] == 400
