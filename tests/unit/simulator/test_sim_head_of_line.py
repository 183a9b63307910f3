"""Head-of-line blocking, reproduced on the sim backend in virtual time.

One client asks for two large files and then never reads; another keeps
asking small questions of the same session. The sim network is bounded like
TCP (a sender waits while its peer has a window's worth unread), so the hub
feels the stalled client's backpressure.

With the old driver behaviour (the `head_of_line` hub defect: the send to a
peer awaited inside the sender's read loop) the agent's read loop at the hub
waits for the stalled client, the other client's answers stop, and the hub
drops the agent for a missed PONG. With per-peer outboxes nobody waits for
the stalled client, and it is cut off as a slow consumer.
"""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest

from tetherbed.simulator.runner import StepFailed
from tetherbed.simulator.scenario import ClientSpec
from tetherbed.simulator.testbed import Testbed, topology

BIG = 6 << 20  # larger than the sim network's window


def stall_scenario(tmp_path: Path, defects: list[str]) -> tuple[list[float], list[str]]:
    """Latencies of the small requests (inf: no answer in 5 s), and hub events."""
    tb = Testbed(
        topology(
            hub={"defects": defects},
            agents={"laptop": {"machine": "m1", "session": "s1"}},
            clients={"fast": {"session": "s1"}},
        ),
        backend="sim",
        workdir=tmp_path,
    )
    try:
        tb.start("hub")
        tb.start("laptop")
        tb.expect(agent="laptop", state="connected")
        for i in range(2):
            (tb.root("laptop") / f"big{i}").write_bytes(b"a" * BIG)
        backend = tb.backend
        loop = backend.loop  # type: ignore[attr-defined]
        stalled = loop.run_until_complete(backend.open_client(ClientSpec("stalled", "s1")))
        for i in range(2):
            request = {"type": "FILE_READ", "id": f"big{i}", "ts": 1.0, "version": "1.1"}
            request["payload"] = {"path": f"big{i}"}
            loop.run_until_complete(stalled.send(msgspec.json.encode(request)))
        tb.wait(1)
        latencies = []
        for _ in range(12):
            started = backend.now()
            try:
                tb.request("fast", "FILE_STAT", {"path": "small"}, within=5)
                latencies.append(backend.now() - started)
            except StepFailed:
                latencies.append(math.inf)
            tb.wait(5)
        events = [r.f for r in tb.history.records if r.process == "hub" and r.type == "event"]
        return latencies, events
    finally:
        tb.close()


def test_the_old_driver_stalls_every_client_and_loses_the_agent(tmp_path: Path) -> None:
    """The failing-before behaviour, kept demonstrable behind the defect switch."""
    latencies, events = stall_scenario(tmp_path, ["head_of_line"])
    assert math.inf in latencies
    assert "pong_timeout" in events


def test_no_client_stalls_another_and_the_slow_one_is_cut_off(tmp_path: Path) -> None:
    latencies, events = stall_scenario(tmp_path, [])
    assert max(latencies) < 0.5, latencies
    assert "pong_timeout" not in events
    assert "slow_consumer" in events


@pytest.mark.parametrize("defects", [["head_of_line"], []])
def test_the_stall_scenario_is_deterministic(tmp_path: Path, defects: list[str]) -> None:
    first = stall_scenario(tmp_path / "a", defects)
    second = stall_scenario(tmp_path / "b", defects)
    assert first == second
