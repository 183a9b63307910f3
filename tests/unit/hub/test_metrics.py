"""The hub's /metrics: what the driver counted, in Prometheus text format.

Each figure is provoked on a real loopback hub and then read back through
prometheus-client's own parser, so the text is also proved to be well formed.
"""

from __future__ import annotations

import asyncio

import aiohttp
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tetherbed.hub.metrics import LATENCY_BOUNDS, LATENCY_SAMPLE, LatencyHistogram
from tetherbed.hub.outbox import Outboxes

from .server_harness import FakeAgent, RunningHub, request, running_hub

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(hub: RunningHub) -> Samples:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://{hub.host}:{hub.port}/metrics") as answer,
    ):
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await answer.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_relayed_frames_connections_and_latency_are_counted() -> None:
    async with running_hub() as hub:
        agent = await FakeAgent.connect(hub, "s1", hub.token("alice", "agent"))
        conn = await connect(
            f"{hub.url}/v1/sessions/s1/client",
            additional_headers={"Authorization": f"Bearer {hub.token('alice', 'client')}"},
            compression=None,
            proxy=None,
        )
        try:
            for n in range(LATENCY_SAMPLE):
                await conn.send(request("FILE_STAT", f"q{n}", {"path": "/w/a"}).decode())
                answer = msgspec.json.decode(await asyncio.wait_for(conn.recv(), 5))
                assert answer["type"] == "FILE_STAT_RESPONSE"
            samples = await scrape(hub)
        finally:
            await conn.close()
            await agent.close()
    assert value(samples, "tetherbed_hub_connections", kind="agent") == 1
    assert value(samples, "tetherbed_hub_connections", kind="client") == 1
    assert value(samples, "tetherbed_hub_sessions_owned") == 1
    n = LATENCY_SAMPLE
    # HELLO and n answers from the agent; n requests from the client
    assert value(samples, "tetherbed_hub_frames_received_total", peer="agent") == n + 1
    assert value(samples, "tetherbed_hub_frames_received_total", peer="client") == n
    # HELLO_ACK and n requests to the agent; n answers to the client
    assert value(samples, "tetherbed_hub_frames_sent_total", peer="agent") == n + 1
    assert value(samples, "tetherbed_hub_frames_sent_total", peer="client") == n
    assert value(samples, "tetherbed_hub_bytes_sent_total", peer="client") > n * 50
    # every frame went straight out; one in LATENCY_SAMPLE of each side's was timed
    # (the client's n-th, the agent's n-th: its HELLO is its first)
    assert value(samples, "tetherbed_hub_relay_latency_seconds_count") == 2
    assert value(samples, "tetherbed_hub_relay_latency_seconds_bucket", le="+Inf") == 2
    assert value(samples, "tetherbed_hub_outbox_wait_seconds_count") == 0
    assert value(samples, "tetherbed_hub_requests_in_flight") == 0
    assert value(samples, "tetherbed_hub_process_resident_memory_bytes") > 0


async def test_takeovers_refusals_and_closes_by_code() -> None:
    async with running_hub() as hub:
        token = hub.token("alice", "agent")
        first = await FakeAgent.connect(hub, "s1", token, machine="m1")
        # the same machine wakes up: takeover, the old connection gets 4427
        second = await FakeAgent.connect(hub, "s1", token, machine="m1")
        # another machine challenges: refused with 4427 after its HELLO
        with pytest.raises(ConnectionClosed) as refused:
            await FakeAgent.connect(hub, "s1", token, machine="m2")
        assert refused.value.rcvd is not None and refused.value.rcvd.code == 4427
        with pytest.raises(InvalidStatus):
            await connect(
                f"{hub.url}/ws/local-executor/s1",
                additional_headers={"Authorization": "Bearer wrong"},
                proxy=None,
            )
        samples = await scrape(hub)
        for agent in (first, second):
            await agent.close()
    assert value(samples, "tetherbed_hub_takeovers_total") == 1
    assert value(samples, "tetherbed_hub_refusals_total", code="4427") == 1
    assert value(samples, "tetherbed_hub_closes_total", code="4427") == 2
    assert (
        value(samples, "tetherbed_hub_upgrade_refusals_total", status="401", code="AUTH_FAILED")
        == 1
    )
    assert value(samples, "tetherbed_hub_events_total", event="takeover") == 1
    assert value(samples, "tetherbed_hub_connections_accepted_total", kind="agent") == 3


async def test_a_frame_that_waits_in_an_outbox_is_timed_when_written() -> None:
    """Under backpressure the wait in the peer's queue is the relay latency."""
    histogram = LatencyHistogram()
    outboxes = Outboxes(limit_bytes=1 << 20, stall_seconds=60, wait_timer=histogram)
    gate = asyncio.Event()
    written: list[bytes] = []

    async def write(data: bytes) -> None:
        await gate.wait()
        written.append(data)

    async def close(code: int, reason: str) -> None:
        return None

    outbox = outboxes.open("peer", write, close, lambda: None)
    assert outbox.put(b"one") is False  # no write_now: it queues
    assert outbox.put(b"two") is False
    await asyncio.sleep(0.02)
    gate.set()
    while len(written) < 2:
        await asyncio.sleep(0.001)
    outbox.stop()
    await outboxes.close()
    assert sum(histogram.counts) == 2
    assert histogram.total >= 0.02
    assert histogram.counts[0] == 0  # neither waited less than the first bound
    assert LATENCY_BOUNDS[0] < 0.02
