"""TCP faults measured through the proxy against a real echo server on loopback.

Timing checks are lower bounds (a fault adds at least its delay) with generous
upper bounds only where they separate "works" from "broken" by a wide margin.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator

import pytest

from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.proxy.registry import ProxyRegistry


class EchoServer:
    """Echoes every byte back; records what it received and how many clients came."""

    def __init__(self) -> None:
        self.accepted = 0
        self.received = bytearray()
        self.data_arrived = asyncio.Event()
        self.address = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def close(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while data := await reader.read(65536):
                self.received += data
                self.data_arrived.set()
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


@pytest.fixture
async def echo() -> AsyncIterator[EchoServer]:
    server = EchoServer()
    await server.start()
    yield server
    server.close()


@pytest.fixture
async def proxy(echo: EchoServer) -> AsyncIterator[FaultProxy]:
    registry = ProxyRegistry(random.Random(1))
    yield await registry.create("echo", "127.0.0.1:0", echo.address)
    await registry.close()


async def connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = proxy.listen.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def round_trip(proxy: FaultProxy, data: bytes = b"ping") -> float:
    reader, writer = await connect(proxy)
    try:
        started = time.monotonic()
        writer.write(data)
        assert await asyncio.wait_for(reader.readexactly(len(data)), 10) == data
        return time.monotonic() - started
    finally:
        writer.close()


async def read_all(reader: asyncio.StreamReader, within: float = 10) -> bytes:
    return await asyncio.wait_for(reader.read(), within)


async def nothing_arrives(reader: asyncio.StreamReader, within: float = 0.3) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1), within)
    except TimeoutError:
        return True
    raise AssertionError(f"expected nothing, got {data!r}")


# -- pass-through -----------------------------------------------------------------


async def test_bytes_pass_unchanged_both_ways(proxy):
    payload = random.Random(0).randbytes(3 * 1024 * 1024)  # more than the high-water mark
    reader, writer = await connect(proxy)
    writer.write(payload)
    writer.write_eof()
    assert await read_all(reader) == payload


async def test_upstream_unreachable_closes_the_client(echo, proxy):
    echo.close()
    await asyncio.sleep(0.05)
    registry = ProxyRegistry()
    dead = await registry.create("dead", "127.0.0.1:0", "127.0.0.1:1")
    try:
        reader, _ = await connect(dead)
        assert await read_all(reader, 5) == b""
    finally:
        await registry.close()


# -- toxics -------------------------------------------------------------------------


async def test_latency_adds_at_least_the_delay_each_way(proxy):
    proxy.add_toxic("latency", stream="downstream", latency=200)
    assert await round_trip(proxy) >= 0.2
    proxy.add_toxic("latency", stream="upstream", latency=150)
    assert await round_trip(proxy) >= 0.35


async def test_latency_does_not_pile_up_for_a_stream_of_writes(proxy):
    proxy.add_toxic("latency", latency=300)
    reader, writer = await connect(proxy)
    for index in range(4):
        if index:
            await asyncio.sleep(0.1)
        writer.write(b"x")
        last_write = time.monotonic()
    await asyncio.wait_for(reader.readexactly(4), 10)
    waited = time.monotonic() - last_write
    assert waited >= 0.3
    # Piled up, the 4th byte would wait for 3 earlier delays: about 0.9 s.
    assert waited < 0.75
    writer.close()


async def test_latency_applies_to_a_connection_already_open(proxy):
    reader, writer = await connect(proxy)
    writer.write(b"a")
    await reader.readexactly(1)
    proxy.add_toxic("latency", latency=250)
    started = time.monotonic()
    writer.write(b"b")
    await asyncio.wait_for(reader.readexactly(1), 10)
    assert time.monotonic() - started >= 0.25
    writer.close()


async def test_bandwidth_bounds_throughput(proxy):
    proxy.add_toxic("bandwidth", stream="downstream", rate=100)  # 100 KB/s
    payload = bytes(range(256)) * 240  # 61 440 bytes: at least 0.6 s at that rate
    started = time.monotonic()
    reader, writer = await connect(proxy)
    writer.write(payload)
    assert await asyncio.wait_for(reader.readexactly(len(payload)), 10) == payload
    assert time.monotonic() - started >= 0.55
    writer.close()


async def test_limit_data_closes_after_n_bytes(proxy):
    proxy.add_toxic("limit_data", stream="downstream", bytes=1000)
    reader, writer = await connect(proxy)
    writer.write(b"z" * 3000)
    assert await read_all(reader) == b"z" * 1000


async def test_reset_peer_gives_the_client_connection_reset(proxy):
    proxy.add_toxic("reset_peer", stream="upstream", timeout=0)
    reader, writer = await connect(proxy)
    writer.write(b"hello")
    with pytest.raises(ConnectionResetError):
        await read_all(reader)


async def test_reset_peer_waits_for_its_timeout(proxy):
    proxy.add_toxic("reset_peer", stream="downstream", timeout=300)
    reader, writer = await connect(proxy)
    started = time.monotonic()
    writer.write(b"hello")
    with pytest.raises(ConnectionResetError):
        await read_all(reader)
    assert time.monotonic() - started >= 0.3


async def test_reset_on_demand_resets_every_connection(proxy, echo):
    clients = [await connect(proxy) for _ in range(2)]
    for reader, writer in clients:
        writer.write(b"a")
        await reader.readexactly(1)
    assert proxy.reset_connections() == 2
    for reader, _ in clients:
        with pytest.raises(ConnectionResetError):
            await read_all(reader)
    assert await round_trip(proxy) >= 0  # new connections still work


async def test_slicer_delivers_small_chunks_spaced_by_delay(proxy):
    proxy.add_toxic("slicer", stream="downstream", average_size=10, size_variation=0, delay=40_000)
    reader, writer = await connect(proxy)
    started = time.monotonic()
    writer.write(b"s" * 60)
    reads = []
    while sum(map(len, reads)) < 60:
        reads.append(await asyncio.wait_for(reader.read(1024), 10))
    assert time.monotonic() - started >= 0.2  # six pieces, 40 ms apart
    assert len(reads) >= 3
    assert min(map(len, reads)) <= 10
    writer.close()


async def test_timeout_stops_data_then_closes(proxy, echo):
    proxy.add_toxic("timeout", stream="downstream", timeout=300)
    reader, writer = await connect(proxy)
    started = time.monotonic()
    writer.write(b"lost")
    assert await read_all(reader) == b""
    assert time.monotonic() - started >= 0.3
    assert echo.received == b"lost"  # the other direction still flowed


async def test_blackhole_drops_data_and_keeps_the_connection(proxy, echo):
    proxy.blackhole("upstream")
    reader, writer = await connect(proxy)
    writer.write(b"dropped")
    assert await nothing_arrives(reader)
    assert echo.received == b""
    proxy.remove_toxic("blackhole_upstream")
    writer.write(b"kept")
    assert await asyncio.wait_for(reader.readexactly(4), 10) == b"kept"
    writer.close()


async def test_slow_close_delays_the_close(proxy):
    proxy.add_toxic("slow_close", stream="downstream", delay=300)
    reader, writer = await connect(proxy)
    writer.write(b"bye")
    await reader.readexactly(3)
    started = time.monotonic()
    writer.write_eof()  # the echo server closes in turn; its FIN comes back late
    assert await read_all(reader) == b""
    assert time.monotonic() - started >= 0.3


async def test_toxicity_zero_leaves_connections_alone(proxy):
    proxy.add_toxic("latency", latency=3000, toxicity=0.0)
    reader, writer = await connect(proxy)
    started = time.monotonic()
    writer.write(b"fast")
    await asyncio.wait_for(reader.readexactly(4), 10)
    assert time.monotonic() - started < 2.0
    assert [c["toxics"]["downstream"] for c in proxy.connections()] == [[]]
    writer.close()


async def test_connections_report_which_toxics_hit_them(proxy):
    proxy.add_toxic("latency", stream="upstream", latency=1, toxicity=1.0)
    _, writer = await connect(proxy)
    for _ in range(100):
        if proxy.connections() and proxy.connections()[0]["toxics"]:
            break
        await asyncio.sleep(0.01)
    (described,) = proxy.connections()
    assert described["toxics"] == {"upstream": ["latency_upstream"], "downstream": []}
    writer.close()


# -- partitions ---------------------------------------------------------------------


async def test_partition_hold_delivers_after_heal(proxy):
    reader, writer = await connect(proxy)
    writer.write(b"1")
    await reader.readexactly(1)
    proxy.partition("both", mode="hold")
    writer.write(b"held")
    assert await nothing_arrives(reader)
    proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(4), 10) == b"held"
    writer.close()


async def test_partition_drop_loses_what_was_sent_meanwhile(proxy, echo):
    reader, writer = await connect(proxy)
    writer.write(b"1")
    await reader.readexactly(1)
    proxy.partition("both", mode="drop")
    writer.write(b"lost")
    assert await nothing_arrives(reader)
    proxy.heal()
    writer.write(b"kept")
    assert await asyncio.wait_for(reader.readexactly(4), 10) == b"kept"
    assert echo.received == b"1kept"
    writer.close()


async def test_upstream_partition_blocks_only_client_to_server(proxy, echo):
    reader, writer = await connect(proxy)
    writer.write(b"1")
    await reader.readexactly(1)
    proxy.partition("upstream")
    echo.data_arrived.clear()
    writer.write(b"up")
    assert await nothing_arrives(reader)
    assert echo.received == b"1"
    proxy.heal("upstream")
    assert await asyncio.wait_for(reader.readexactly(2), 10) == b"up"
    writer.close()


async def test_downstream_partition_blocks_only_server_to_client(proxy, echo):
    reader, writer = await connect(proxy)
    writer.write(b"1")
    await reader.readexactly(1)
    proxy.partition("downstream")
    echo.data_arrived.clear()
    writer.write(b"down")
    await asyncio.wait_for(echo.data_arrived.wait(), 10)  # the server got it...
    assert await nothing_arrives(reader)  # ...but its answer is held
    proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(4), 10) == b"down"
    writer.close()


async def test_new_connections_hang_during_a_full_partition(proxy, echo):
    proxy.partition("both")
    reader, writer = await connect(proxy)  # the proxy's socket accepts...
    writer.write(b"early")
    assert await nothing_arrives(reader)
    assert echo.accepted == 0  # ...but nothing reaches the upstream
    proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(5), 10) == b"early"
    assert echo.accepted == 1
    writer.close()


async def test_partition_timeout_mode_closes_connections(proxy):
    reader, writer = await connect(proxy)
    writer.write(b"1")
    await reader.readexactly(1)
    started = time.monotonic()
    proxy.partition("both", mode="timeout", timeout=300)
    writer.write(b"lost")
    assert await read_all(reader) == b""
    assert time.monotonic() - started >= 0.3


# -- enabled ------------------------------------------------------------------------


async def test_disabled_proxy_refuses_and_cuts_then_comes_back(proxy):
    reader, writer = await connect(proxy)
    writer.write(b"1")
    await reader.readexactly(1)
    await proxy.set_enabled(False)
    with contextlib.suppress(ConnectionResetError):
        assert await read_all(reader) == b""
    with pytest.raises(ConnectionRefusedError):
        await connect(proxy)
    await proxy.set_enabled(True)
    assert await round_trip(proxy) >= 0
