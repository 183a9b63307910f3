"""Faults on the sim backend mean what they mean on the fault proxy.

The process and docker backends carry a scenario's `fault:` out with the fault
proxy's toxics; the sim backend must give the same bytes the same times: a
bandwidth limit serialises frames, a slicer spaces each frame's pieces, and
limit_data counts only the direction it was set on, per connection.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import msgspec
import pytest

from tetherbed.runtime.transport import TransportClosed
from tetherbed.simulator.backends.sim import SimBackend
from tetherbed.simulator.proxy.stages import BandwidthStage, SlicerStage
from tetherbed.simulator.scenario import parse
from tetherbed.simulator.sim.network import MAX_LATENCY, SimEndpoint, SimNetwork

SCENARIO = parse(
    {
        "name": "faults",
        "topology": {"agents": {"a": {"session": "s"}}},
        "steps": [{"start": "hub"}],
    }
)
#: The sim's own one-way latency, at most (base plus its jitter).
BASE = MAX_LATENCY


def frame(size: int, kind: str = "X") -> bytes:
    """A JSON text frame of exactly `size` bytes."""
    head = msgspec.json.encode({"type": kind, "pad": ""})
    return msgspec.json.encode({"type": kind, "pad": "p" * (size - len(head))})


async def pair(network: SimNetwork, node: str = "a") -> tuple[SimEndpoint, SimEndpoint]:
    accepted: asyncio.Queue[SimEndpoint] = asyncio.Queue()

    async def serve(end: SimEndpoint, path: str, headers: object) -> None:
        await accepted.put(end)

    network.listen(lambda path, headers: None, serve)
    node_end = await network.connector(node)("sim://hub/ws/local-executor/s", {})
    return node_end, await accepted.get()


def run(tmp_path: Path, main) -> object:  # type: ignore[no-untyped-def]
    backend = SimBackend(SCENARIO, tmp_path, 1)
    return backend.run(main(backend))


async def arrivals(sender: SimEndpoint, receiver: SimEndpoint, frames: list[bytes]) -> list[float]:
    loop = asyncio.get_running_loop()
    start = loop.time()
    for data in frames:
        await sender.send(data)
    times = []
    for data in frames:
        assert await asyncio.wait_for(receiver.recv(), 600) == data
        times.append(loop.time() - start)
    return times


def test_bandwidth_serialises_frames(tmp_path: Path) -> None:
    """Two 1000-byte frames at 1 KB/s: the second leaves after the first, 2 s in."""

    async def main(backend: SimBackend) -> list[float]:
        node, hub = await pair(backend.network)
        await backend.fault("a", "bandwidth", {"rate_kbps": 1, "direction": "to_hub"})
        return await arrivals(node, hub, [frame(1000), frame(1000)])

    first, second = run(tmp_path, main)  # type: ignore[misc]
    assert 1.0 <= first <= 1.0 + 0.2 + BASE
    assert 2.0 <= second <= 2.0 + 0.2 + BASE


def test_bandwidth_matches_the_proxy_stage(tmp_path: Path) -> None:
    """The sim's arrival times are the proxy's BandwidthStage times (plus the sim's own latency)."""
    sizes = [300, 2500, 40, 1200]

    async def main(backend: SimBackend) -> list[float]:
        node, hub = await pair(backend.network)
        await backend.fault("a", "bandwidth", {"rate_kbps": 2})
        return await arrivals(hub, node, [frame(n) for n in sizes])

    got = run(tmp_path, main)
    stage = BandwidthStage(2)
    expected = []
    for n in sizes:
        # The stage sees the frame as it crosses the wire: header plus payload.
        pieces = stage.process(b"x" * (n + (2 if n < 126 else 4)), 0.0)
        expected.append(pieces[-1][0])
    for t, want in zip(got, expected, strict=True):  # type: ignore[call-overload]
        assert want <= t <= want + BASE + 1e-6


def test_bandwidth_in_one_direction_leaves_the_other_alone(tmp_path: Path) -> None:
    async def main(backend: SimBackend) -> list[float]:
        node, hub = await pair(backend.network)
        await backend.fault("a", "bandwidth", {"rate_kbps": 1, "direction": "to_hub"})
        return await arrivals(hub, node, [frame(5000)])

    (t,) = run(tmp_path, main)  # type: ignore[misc]
    assert t <= BASE


def test_slicer_spaces_the_pieces_of_each_frame(tmp_path: Path) -> None:
    """A 1600-byte frame in 16-byte pieces 1 ms apart arrives ~100 ms later, not 1 ms."""

    async def main(backend: SimBackend) -> list[float]:
        node, hub = await pair(backend.network)
        await backend.fault("a", "slicer", {"average_size": 16, "delay_ms": 1})
        return await arrivals(node, hub, [frame(1600), frame(1600)])

    first, second = run(tmp_path, main)  # type: ignore[misc]
    stage = SlicerStage(16, 0, 1000, random.Random(0))
    wire = 1600 + 4 + 4  # header with a 16-bit length, and the client's mask
    want_first = stage.process(b"x" * wire, 0.0)[-1][0]
    want_second = stage.process(b"x" * wire, 0.0)[-1][0]
    assert want_first <= first <= want_first + BASE + 1e-6
    assert want_second <= second <= want_second + BASE + 1e-6
    assert first > 0.09 and second > 0.19


def test_limit_data_counts_only_its_direction(tmp_path: Path) -> None:
    """limit_data to_hub: the hub may send any amount; the agent's bytes are counted."""

    async def main(backend: SimBackend) -> tuple[bool, int | None]:
        node, hub = await pair(backend.network)
        await backend.fault("a", "limit_data", {"bytes": 3000, "direction": "to_hub"})
        for _ in range(5):
            await hub.send(frame(1000))
        for _ in range(5):
            await asyncio.wait_for(node.recv(), 5)
        await node.send(frame(1000))
        await node.send(frame(1000))
        down_survived = True
        with pytest.raises(TransportClosed) as closed:
            await node.send(frame(1500))
            await asyncio.wait_for(hub.recv(), 5)
            await asyncio.wait_for(hub.recv(), 5)
            await asyncio.wait_for(hub.recv(), 5)
        return down_survived, closed.value.code

    survived, code = run(tmp_path, main)  # type: ignore[misc]
    assert survived and code is None


def test_limit_data_counts_per_connection(tmp_path: Path) -> None:
    """As on the proxy, each new connection gets the full allowance."""

    async def main(backend: SimBackend) -> int:
        node, hub = await pair(backend.network)
        await backend.fault("a", "limit_data", {"bytes": 1500, "direction": "to_hub"})
        await node.send(frame(1000))
        await asyncio.wait_for(hub.recv(), 5)
        node2, hub2 = await pair(backend.network)
        await node2.send(frame(1000))
        await asyncio.wait_for(hub2.recv(), 5)
        return 2

    assert run(tmp_path, main) == 2
