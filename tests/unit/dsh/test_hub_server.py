"""The dsh routes on a real hub application over loopback sockets (in process)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tetherbed.agent.dsh.transport import HubHttp
from tetherbed.hub.config import HubConfig
from tetherbed.hub.dsh.config import DshConfig
from tetherbed.hub.server import HubServer
from tetherbed.hub.store import HubStore
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh import schema
from tetherbed.wire.dsh.sse import SseDecoder, SseEvent


@dataclass
class Hub:
    server: TestServer
    hub: HubServer
    client_token: str
    http: aiohttp.ClientSession

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    def api(self, route: str) -> str:
        return self.url + C.url(route)

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.client_token}"}

    async def key(self, **body: object) -> dict:
        async with self.http.post(self.api(C.Route.KEYS), json=body, headers=self.auth()) as r:
            assert r.status == 200, await r.text()
            return await r.json()

    async def enroll(self, name: str = "box") -> dict:
        key = (await self.key(os="linux"))["key"]
        body = {
            "key": key,
            "agentVersion": "1.3.0",
            "machine": {"hostname": name, "name": name},
            "capabilities": ["exec", "fs"],
        }
        async with self.http.post(self.api(C.Route.ENROLL), json=body) as r:
            assert r.status == 200, await r.text()
            return await r.json()

    async def state(self) -> dict:
        async with self.http.get(self.api(C.Route.STATE), headers=self.auth()) as r:
            return await r.json()


async def _start(tmp_path: Path, **dsh: object) -> tuple[TestServer, HubServer, str]:
    store = HubStore(tmp_path / "state")
    token = store.create_token("alice", "client")
    hub = HubServer(HubConfig(dsh=DshConfig(**dsh)), store)
    server = TestServer(hub.app, host="127.0.0.1")
    await server.start_server()
    return server, hub, token


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    server, app, token = await _start(tmp_path)
    async with aiohttp.ClientSession() as http:
        yield Hub(server, app, token, http)
    await server.close()


async def _open(hub: Hub, token: str) -> tuple[object, SseDecoder, list]:
    http = HubHttp(hub.url, token)
    stream = await http.open_stream(C.url(C.Route.EVENTS))
    return stream, SseDecoder(), []


async def _next_event(stream: object, decoder: SseDecoder) -> SseEvent | None:
    async for data in stream.chunks():  # type: ignore[attr-defined]
        for item in decoder.feed(data):
            if isinstance(item, SseEvent):
                return item
    return None


async def test_the_event_stream_headers_retry_line_and_hello(hub: Hub) -> None:
    enrolled = await hub.enroll()
    stream, decoder, _ = await _open(hub, enrolled["token"])
    head = stream.head
    assert head.status == 200
    assert head.header("content-type") == "text/event-stream; charset=utf-8"
    assert head.header("cache-control") == "no-store"
    assert head.header("x-accel-buffering") == "no"
    assert head.header("connection") == "keep-alive"
    first = b""
    async for data in stream.chunks():
        first += data
        if b"event: hello" in first:
            break
    assert first.startswith(b"retry: 2000\n\n")
    hello = next(e for e in decoder.feed(first) if isinstance(e, SseEvent))
    assert schema.problems(hello.json(), schema.HELLO) == []
    assert (await hub.state())["computers"][0]["online"] is True
    stream.close()


async def test_a_second_stream_ends_the_first(hub: Hub) -> None:
    token = (await hub.enroll())["token"]
    first, decoder, _ = await _open(hub, token)
    assert (await _next_event(first, decoder)).event == "hello"
    second, decoder2, _ = await _open(hub, token)
    assert (await _next_event(second, decoder2)).event == "hello"
    assert await asyncio.wait_for(_next_event(first, decoder), 5) is None  # ended
    state = await hub.state()
    assert state["computers"][0]["online"] is True
    first.close()
    second.close()


async def test_a_killed_agent_is_offline_on_the_next_state_read(hub: Hub) -> None:
    token = (await hub.enroll())["token"]
    stream, decoder, _ = await _open(hub, token)
    await _next_event(stream, decoder)
    stream.close()  # like a killed process: the kernel closes the socket
    for _ in range(50):
        if not (await hub.state())["computers"][0]["online"]:
            break
        await asyncio.sleep(0.02)
    assert (await hub.state())["computers"][0]["online"] is False


async def test_delete_ends_the_stream_and_the_token_is_refused(hub: Hub) -> None:
    enrolled = await hub.enroll()
    stream, decoder, _ = await _open(hub, enrolled["token"])
    await _next_event(stream, decoder)
    body = {"id": enrolled["computerId"]}
    async with hub.http.post(hub.api(C.Route.DELETE), json=body, headers=hub.auth()) as r:
        assert await r.json() == {"ok": True}
    assert await asyncio.wait_for(_next_event(stream, decoder), 5) is None
    async with hub.http.get(hub.api(C.Route.EVENTS), headers=hub.auth(enrolled["token"])) as r:
        assert r.status == 401 and (await r.json())["error"] == "invalid-token"
    stream.close()


async def test_browser_routes_need_a_client_token(hub: Hub) -> None:
    agent_token = (await hub.enroll())["token"]
    for token in (None, agent_token, "tb_c_wrong"):
        headers = hub.auth(token) if token else {}
        for method, route in (
            ("GET", C.Route.STATE),
            ("POST", C.Route.KEYS),
            ("GET", C.Route.KEY_STATUS),
            ("POST", C.Route.RENAME),
            ("POST", C.Route.DELETE),
        ):
            async with hub.http.request(method, hub.api(route), headers=headers) as r:
                assert r.status == 401, route
                assert (await r.json())["error"] == "unadmitted"
                assert r.headers["Cache-Control"] == "no-store"
    for route in (C.Route.HEALTH, C.Route.AGENT_PYZ, C.Route.SETTINGS_PAGE):
        async with hub.http.get(hub.api(route)) as r:
            assert r.status == 200, route


async def test_agent_routes_need_the_agent_token(hub: Hub) -> None:
    for route in (C.Route.RESULTS, C.Route.RESULTS_CHUNK, C.Route.HEARTBEAT, C.Route.FS_RESULT):
        async with hub.http.post(hub.api(route), json={}, headers=hub.auth()) as r:
            assert r.status == 401, route
            assert (await r.json())["error"] == "invalid-token"


async def test_bodies_over_the_limit_are_refused_before_they_are_read(hub: Hub) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", hub.server.port)
    writer.write(
        b"POST /api/dsh-computers/agent/enroll HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 17000\r\n\r\n"
    )  # and no body at all: the answer must not wait for it
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 413")
    writer.close()

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 1024

    async with hub.http.post(hub.api(C.Route.ENROLL), data=chunks()) as r:
        assert r.status == 413 and (await r.json())["error"] == "too-large"
    async with hub.http.post(hub.api(C.Route.ENROLL), data=b"{nope") as r:
        assert r.status == 400 and (await r.json())["error"] == "bad-request"


async def test_join_sh_uses_the_socket_address_never_a_forwarded_header(hub: Hub) -> None:
    key = (await hub.key(os="linux"))["key"]
    forged = {
        "Host": "evil.example",
        "X-Forwarded-Host": "evil.example",
        "X-Forwarded-Proto": "https",
        "Forwarded": "proto=https;host=evil.example",
    }
    async with hub.http.get(hub.api(C.Route.JOIN_SH), params={"key": key}, headers=forged) as r:
        assert r.status == 200
        script = await r.text()
    assert "evil" not in script
    assert f"SERVER='{hub.url}'" in script
    async with hub.http.post(hub.api(C.Route.KEYS), json={}, headers={**hub.auth(), **forged}) as r:
        created = await r.json()
    assert "evil" not in json.dumps(created)
    assert created["serverUrl"] == hub.url
    syntax = subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True, check=False)
    assert syntax.returncode == 0, syntax.stderr


async def test_join_is_refused_for_a_bad_key(hub: Hub) -> None:
    for key in ("", "dshc_" + "A" * 43, "'; rm -rf /"):
        async with hub.http.get(hub.api(C.Route.JOIN_SH), params={"key": key}) as r:
            assert r.status == 410
            assert "create a new key" in await r.text()
    used = (await hub.key())["key"]
    await hub.key()  # the new key uses up the first
    async with hub.http.get(hub.api(C.Route.JOIN_PS1), params={"key": used}) as r:
        assert r.status == 410


async def test_defect_the_install_url_from_a_forwarded_header(tmp_path: Path) -> None:
    server, app, token = await _start(
        tmp_path, defects=frozenset({"install_url_from_forwarded_header"})
    )
    try:
        async with aiohttp.ClientSession() as http:
            hub = Hub(server, app, token, http)
            key = (await hub.key())["key"]
            headers = {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}
            async with http.get(
                hub.api(C.Route.JOIN_SH), params={"key": key}, headers=headers
            ) as r:
                assert "SERVER='https://evil.example'" in await r.text()
    finally:
        await server.close()


async def test_the_public_url_wins(tmp_path: Path) -> None:
    server, app, token = await _start(tmp_path, public_url="https://hub.example.com/dsh/")
    try:
        async with aiohttp.ClientSession() as http:
            hub = Hub(server, app, token, http)
            created = await hub.key()
            assert created["installUrl"].startswith(
                "https://hub.example.com/dsh/api/dsh-computers/join.sh?key="
            )
    finally:
        await server.close()


async def test_the_agent_download_runs_with_nothing_but_the_standard_library(
    hub: Hub, tmp_path: Path
) -> None:
    async with hub.http.get(hub.api(C.Route.AGENT_PYZ)) as r:
        assert r.status == 200 and r.headers["Content-Type"] == "application/zip"
        bundle = tmp_path / "agent.pyz"
        bundle.write_bytes(await r.read())
    # -I -S: no site-packages, no user paths; only the standard library is there.
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(bundle), "--version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("agent.pyz 1.3.0+tetherbed.")
    async with hub.http.get(hub.api(C.Route.AGENT_MJS)) as r:
        assert r.status == 404 and "agent.pyz" in (await r.json())["message"]


async def test_tool_calls_are_checked(hub: Hub) -> None:
    base = hub.url + "/v1/computers/tools/"
    async with hub.http.post(base + "computer_exec", json={"computer": "x"}) as r:
        assert r.status == 401
    async with hub.http.post(base + "rm_rf", json={}, headers=hub.auth()) as r:
        assert (r.status, (await r.json())["error"]["code"]) == (404, "unknown-tool")
    async with hub.http.post(
        base + "computer_exec", json={"computer": 1, "command": "x", "z": 1}, headers=hub.auth()
    ) as r:
        error = (await r.json())["error"]
        assert r.status == 400 and "`computer` must be a string" in error["message"]
        assert "unknown argument `z`" in error["message"]
    async with hub.http.post(base + "computer_read", json={"path": "/x"}, headers=hub.auth()) as r:
        assert (await r.json())["error"]["code"] == "capability-missing"  # no fs computer yet
    async with hub.http.get(hub.url + "/v1/computers/tools", headers=hub.auth()) as r:
        names = [t["name"] for t in (await r.json())["tools"]]
    assert names == ["computer_list", "computer_exec", "job_output", "job_kill"]


async def test_the_registry_survives_a_hub_restart(tmp_path: Path) -> None:
    server, app, token = await _start(tmp_path)
    async with aiohttp.ClientSession() as http:
        enrolled = await Hub(server, app, token, http).enroll("keeper")
    await server.close()
    app.store.close()
    server, app, token = await _start(tmp_path)
    try:
        hub = Hub(server, app, token, None)  # type: ignore[arg-type]
        stream, decoder, _ = await _open(hub, enrolled["token"])
        hello = await _next_event(stream, decoder)
        assert hello is not None and hello.json()["computerId"] == enrolled["computerId"]
        stream.close()
    finally:
        await server.close()
