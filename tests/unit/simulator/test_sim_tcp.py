"""The sim network's byte-stream connections: order, partitions, pause, RST, TCP_USER_TIMEOUT,
and the dsh wire recorder on them (never a header or a credential in the history)."""

from __future__ import annotations

import asyncio
import json
import random
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tetherbed.simulator.recorder import Recorder
from tetherbed.simulator.sim.network import SimNetwork
from tetherbed.simulator.sim.tcp import SimTcp
from tetherbed.simulator.virtual_time import VirtualTimeLoop


class Server(asyncio.Protocol):
    """The hub's side: records what it gets, answers each line with `ok:LINE`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.data = b""
        self.lost: list[BaseException | None] = []
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.data += data
        while b"\n" in self.data:
            line, self.data = self.data.split(b"\n", 1)
            assert self.transport is not None
            self.transport.write(b"ok:" + line + b"\n")

    def eof_received(self) -> bool:
        self.eof = True
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost.append(exc)


def run(body: Callable[[SimNetwork, SimTcp, list[Server], Recorder], Coroutine[Any, Any, None]]):
    loop = VirtualTimeLoop()
    asyncio.set_event_loop(loop)
    try:

        async def main() -> None:
            network = SimNetwork(random.Random(1))
            tcp = SimTcp(network)
            recorder = Recorder(loop.time)
            tcp.taps["a"] = recorder.dsh_wire_log("a")
            servers: list[Server] = []

            def accept() -> Server:
                servers.append(Server())
                return servers[-1]

            tcp.listen(accept)
            try:
                await body(network, tcp, servers, recorder)
            finally:
                await tcp.close()

        loop.run_until_complete(main())
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def test_bytes_arrive_in_order_and_a_close_is_a_half_close_then_the_end() -> None:
    async def body(network, tcp, servers, recorder) -> None:
        reader, writer = await tcp.open("a")
        for n in range(5):
            writer.write(f"line {n}\n".encode())
        got = [await reader.readline() for _ in range(5)]
        assert got == [f"ok:line {n}\n".encode() for n in range(5)]
        writer.close()
        await asyncio.sleep(1)
        assert servers[0].eof and servers[0].lost == [None]
        assert [r.f for r in recorder.history][-1] == "end"

    run(body)


def test_a_partition_holds_bytes_until_healed_and_new_connections_wait() -> None:
    async def body(network, tcp, servers, recorder) -> None:
        reader, writer = await tcp.open("a")
        network.set_held("a", "both", True)
        writer.write(b"held\n")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readline(), 30)
        opening = asyncio.ensure_future(tcp.open("a"))
        await asyncio.sleep(5)
        assert not opening.done()
        network.set_held("a", "both", False)
        assert await asyncio.wait_for(reader.readline(), 1) == b"ok:held\n"
        await asyncio.wait_for(opening, 1)

    run(body)


def test_a_reset_reaches_both_sides_at_once() -> None:
    async def body(network, tcp, servers, recorder) -> None:
        reader, writer = await tcp.open("a")
        writer.write(b"x\n")
        await reader.readline()
        assert tcp.reset("a") == 1
        with pytest.raises(ConnectionResetError):
            await reader.read(10)
        await asyncio.sleep(0)
        assert isinstance(servers[0].lost[0], ConnectionResetError)
        assert recorder.history.records[-1].value["how"] == "reset"

    run(body)


def test_tcp_user_timeout_ends_the_writer_behind_a_partition_but_not_behind_a_pause() -> None:
    async def body(network, tcp, servers, recorder) -> None:
        reader, writer = await tcp.open("a")
        writer.write(b"x\n")
        await reader.readline()
        server = servers[0]
        assert server.transport is not None
        sock = server.transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 2000)
        network.set_paused("a", True)  # a sleeping laptop's kernel still acknowledges
        server.transport.write(b"ping\n")
        await asyncio.sleep(5)
        assert server.lost == []
        network.set_paused("a", False)
        assert await reader.readline() == b"ping\n"
        network.set_held("a", "down", True)  # a partition: nothing is acknowledged
        server.transport.write(b"ping\n")
        await asyncio.sleep(1.9)
        assert server.lost == []
        await asyncio.sleep(0.2)
        assert isinstance(server.lost[0], TimeoutError)
        network.set_held("a", "down", False)  # the peer learns once the path is back
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(100), 1)

    run(body)


def test_nothing_listening_is_unreachable_and_recorded_so() -> None:
    async def body(network, tcp, servers, recorder) -> None:
        tcp.stop_listening()
        with pytest.raises(ConnectionRefusedError):
            await tcp.open("a")
        assert [r.f for r in recorder.history] == ["connect", "unreachable", "end"]

    run(body)


def test_the_recorder_keeps_no_header_key_or_token() -> None:
    key = "dshc_" + "K" * 43
    token = "dshc_" + "T" * 43
    enroll = json.dumps({"key": key, "machine": {"name": "desk"}}).encode()
    answer = json.dumps({"computerId": "cmp_0123456789ab", "token": token}).encode()

    class Hub(Server):
        def data_received(self, data: bytes) -> None:
            self.data += data
            if not self.data.endswith(enroll):  # the whole request first
                return
            assert self.transport is not None
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                + answer
            )

    async def body(network, tcp, servers, recorder) -> None:
        tcp.listen(Hub)
        reader, writer = await tcp.open("a")
        writer.write(
            b"POST /api/dsh-computers/agent/enroll HTTP/1.1\r\nHost: hub\r\n"
            + f"Authorization: Bearer {token}\r\nContent-Length: {len(enroll)}\r\n\r\n".encode()
            + enroll
        )
        await reader.read(4096)
        await asyncio.sleep(0.1)
        text = "".join(json.dumps(r.to_dict()) for r in recorder.history)
        assert key not in text and token not in text and "Bearer" not in text
        request, response = [r for r in recorder.history if r.f.startswith("http_")]
        assert request.value["body"]["keyDigest"] and request.value["body"]["name"] == "desk"
        assert response.value["body"] == {"computerId": "cmp_0123456789ab"}

    run(body)
