"""The sim backend's in-memory network: order, holding, faults, closes — in virtual time."""

from __future__ import annotations

import asyncio
import random

import msgspec
import pytest

from tetherbed.runtime.transport import TransportClosed, UpgradeRefused
from tetherbed.simulator.proxy.toxics import Toxic
from tetherbed.simulator.proxy.ws.rules import MessageRule
from tetherbed.simulator.sim.network import SimEndpoint, SimNetwork
from tetherbed.simulator.virtual_time import run_virtual


def frame(kind: str, n: int = 0) -> bytes:
    return msgspec.json.encode({"type": kind, "id": str(n)})


async def pair(network: SimNetwork, node: str = "agent") -> tuple[SimEndpoint, SimEndpoint]:
    accepted: asyncio.Queue[SimEndpoint] = asyncio.Queue()

    async def serve(end: SimEndpoint, path: str, headers: object) -> None:
        await accepted.put(end)

    network.listen(lambda path, headers: None, serve)
    node_end = await network.connector(node)("sim://hub/ws/local-executor/s", {})
    return node_end, await accepted.get()


def test_messages_arrive_in_order_after_the_latency() -> None:
    async def main() -> list[tuple[float, bytes]]:
        network = SimNetwork(random.Random(1))
        node, hub = await pair(network)
        network.add_toxic("agent", Toxic.create("latency", stream="upstream", latency=500))
        start = asyncio.get_running_loop().time()
        for i in range(5):
            await node.send(frame("X", i))
        got = []
        for _ in range(5):
            data = await hub.recv()
            got.append((asyncio.get_running_loop().time() - start, data))
        return got

    got = run_virtual(main())
    assert [d for _, d in got] == [frame("X", i) for i in range(5)]
    assert all(t >= 0.5 for t, _ in got)


def test_a_partition_holds_messages_until_healed() -> None:
    async def main() -> tuple[bool, bytes]:
        network = SimNetwork(random.Random(1))
        node, hub = await pair(network)
        network.set_held("agent", "up", True)
        await node.send(frame("HELD"))
        try:
            await asyncio.wait_for(hub.recv(), 30)
            arrived_during_partition = True
        except TimeoutError:
            arrived_during_partition = False
        network.set_held("agent", "both", False)
        return arrived_during_partition, await asyncio.wait_for(hub.recv(), 1)

    during, after = run_virtual(main())
    assert not during and after == frame("HELD")


def test_a_paused_node_neither_sends_nor_reads() -> None:
    async def main() -> list[str]:
        network = SimNetwork(random.Random(1))
        node, hub = await pair(network)
        order: list[str] = []
        network.set_paused("agent", True)
        sender = asyncio.ensure_future(node.send(frame("FROM_SLEEPER")))
        await hub.send(frame("TO_SLEEPER"))
        await asyncio.sleep(60)
        order.append(f"sent={sender.done()}")
        network.set_paused("agent", False)
        await sender
        order.append((await node.recv()).decode())
        order.append((await hub.recv()).decode())
        return order

    order = run_virtual(main())
    assert order[0] == "sent=False"
    assert "TO_SLEEPER" in order[1] and "FROM_SLEEPER" in order[2]


def test_rules_drop_duplicate_and_reorder_by_type() -> None:
    async def main() -> list[str]:
        network = SimNetwork(random.Random(1))
        node, hub = await pair(network)
        network.add_rule("agent", MessageRule("drop", "upstream", "PONG", count=1))
        network.add_rule("agent", MessageRule("duplicate", "upstream", "DUP"))
        network.add_rule("agent", MessageRule("reorder", "upstream", "FIRST", count=1))
        for kind in ("PONG", "PONG", "DUP", "FIRST", "SECOND"):
            await node.send(frame(kind))
        got = []
        for _ in range(5):
            got.append(msgspec.json.decode(await asyncio.wait_for(hub.recv(), 5))["type"])
        return got

    assert run_virtual(main()) == ["PONG", "DUP", "DUP", "SECOND", "FIRST"]


def test_close_reaches_the_peer_with_its_code_and_reset_drops_both_ends() -> None:
    async def main() -> tuple[int | None, int | None, int | None]:
        network = SimNetwork(random.Random(1))
        node, hub = await pair(network)
        await hub.close(4427, "taken over")
        with pytest.raises(TransportClosed) as closed:
            await node.recv()
        node2, hub2 = await pair(network)
        network.reset("agent")
        with pytest.raises(TransportClosed) as node_side:
            await node2.recv()
        with pytest.raises(TransportClosed) as hub_side:
            await hub2.recv()
        return closed.value.code, node_side.value.code, hub_side.value.code

    assert run_virtual(main()) == (4427, None, None)


def test_refusals_and_partitioned_connects() -> None:
    async def main() -> tuple[int, str]:
        network = SimNetwork(random.Random(1))
        network.listen(lambda path, headers: (401, b"no"), lambda *a: asyncio.sleep(0))
        with pytest.raises(UpgradeRefused) as refused:
            await network.connector("agent")("sim://hub/x", {})
        network.set_held("lonely", "both", True)
        with pytest.raises(TimeoutError) as timed_out:
            await network.connector("lonely")("sim://hub/x", {})
        return refused.value.status, str(timed_out.value)

    status, why = run_virtual(main())
    assert status == 401 and "partition" in why


def test_a_sender_waits_while_its_peer_has_a_window_unread() -> None:
    """Bounded like TCP: a peer that stops reading pushes back on its sender."""

    async def main() -> tuple[int, int, bool]:
        network = SimNetwork(random.Random(1), window_bytes=1000)
        node, hub = await pair(network)
        sent = 0

        async def flood() -> None:
            nonlocal sent
            while True:
                await hub.send(b"x" * 300)
                sent += 1

        task = asyncio.ensure_future(flood())
        await asyncio.sleep(5)
        blocked_at = sent
        for _ in range(3):
            await node.recv()
        await asyncio.sleep(5)
        after_reads = sent
        network.abort(node)
        await asyncio.sleep(1)
        ended = task.done()
        if not ended:
            task.cancel()
        return blocked_at, after_reads, ended and isinstance(task.exception(), TransportClosed)

    blocked_at, after_reads, ended = run_virtual(main())
    assert blocked_at == 4  # 1200 bytes unread: the fifth send waits
    assert after_reads == blocked_at + 3  # each read made room for one more
    assert ended  # a dropped connection releases the waiting sender
