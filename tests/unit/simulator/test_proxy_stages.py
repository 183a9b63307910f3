"""Toxic stages and chains as timelines: no sockets, no sleeping."""

from __future__ import annotations

import random

import pytest

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.chain import ToxicChain
from tetherbed.simulator.proxy.events import Signal
from tetherbed.simulator.proxy.stages import (
    BandwidthStage,
    LatencyStage,
    LimitDataStage,
    SlicerStage,
    SlowCloseStage,
)
from tetherbed.simulator.proxy.toxics import Toxic


class FakeTimers:
    def __init__(self) -> None:
        self.pending: list[tuple[float, object]] = []

    def call_at(self, when, callback):
        entry = [when, callback, False]
        self.pending.append(entry)

        class Handle:
            def cancel(self_inner) -> None:
                entry[2] = True

        return Handle()

    def fire_all(self) -> None:
        for _when, callback, cancelled in sorted(self.pending, key=lambda e: e[0]):
            if not cancelled:
                callback()
        self.pending.clear()


def test_latency_does_not_accumulate_for_data_arriving_while_delayed():
    stage = LatencyStage(300, 0, random.Random(0))
    times = [stage.process(b"x", at)[0][0] for at in (0.0, 0.1, 0.2, 0.3)]
    assert times == pytest.approx([0.3, 0.4, 0.5, 0.6])
    assert stage.process(Signal.EOF, 0.35) == [(pytest.approx(0.6), Signal.EOF)]


def test_latency_jitter_is_bounded_ordered_and_seeded():
    def run(seed: int) -> list[float]:
        stage = LatencyStage(100, 50, random.Random(seed))
        return [stage.process(b"x", i * 0.001)[0][0] for i in range(50)]

    first = run(4)
    assert first == run(4)
    assert first != run(5)
    assert first == sorted(first)  # jitter never reorders bytes
    delays = [t - i * 0.001 for i, t in enumerate(first)]
    assert min(delays) >= 0.05 - 1e-9
    assert len({round(d, 6) for d in delays}) > 10  # the jitter does vary


def test_bandwidth_spreads_bytes_over_time():
    stage = BandwidthStage(10)  # 10 KB/s → 1000-byte pieces every 0.1 s
    out = stage.process(b"x" * 5000, 0.0)
    assert [len(piece) for _, piece in out] == [1000] * 5
    assert [t for t, _ in out] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert stage.process(b"y" * 10, 0.0)[0][0] == pytest.approx(0.501)


def test_slicer_sizes_vary_within_bounds_and_follow_the_seed():
    def sizes(seed: int) -> list[int]:
        return SlicerStage(10, 4, 1000, random.Random(seed)).sizes(500)

    assert sizes(1) == sizes(1)
    assert sizes(1) != sizes(2)
    assert sum(sizes(1)) == 500
    assert all(6 <= size <= 14 for size in sizes(1)[:-1])


def test_slicer_spaces_pieces_by_delay_microseconds():
    out = SlicerStage(3, 0, 10_000, random.Random(0)).process(b"abcdefgh", 1.0)
    assert [piece for _, piece in out] == [b"abc", b"def", b"gh"]
    assert [t for t, _ in out] == pytest.approx([1.0, 1.01, 1.02])


def test_limit_data_truncates_then_closes():
    stage = LimitDataStage(5)
    assert stage.process(b"abc", 0) == [(0, b"abc")]
    assert stage.process(b"defg", 1) == [(1, b"de"), (1, Signal.CLOSE)]
    assert stage.process(b"more", 2) == []


def test_slow_close_delays_only_the_end():
    stage = SlowCloseStage(500)
    assert stage.process(b"a", 1.0) == [(1.0, b"a")]
    assert stage.process(Signal.EOF, 1.0) == [(1.5, Signal.EOF)]


def _chain(seed: int, sink, timers: FakeTimers | None = None) -> ToxicChain:
    timers = timers or FakeTimers()
    return ToxicChain(sink, rng=random.Random(seed), call_at=timers.call_at, clock=lambda: 0.0)


def test_toxicity_is_drawn_per_connection_from_the_seed():
    toxic = Toxic.create("latency", latency=100, toxicity=0.5)
    draws = [_affected(seed, toxic) for seed in range(40)]
    assert draws == [_affected(seed, toxic) for seed in range(40)]
    assert 5 < sum(draws) < 35
    never = Toxic.create("latency", latency=1, toxicity=0.0)
    assert not any(_affected(seed, never) for seed in range(20))


def _affected(seed: int, toxic: Toxic) -> bool:
    chain = _chain(seed, lambda *_: None)
    chain.sync([toxic])
    return chain.active() == [toxic.name]


def test_chain_runs_toxics_in_order_and_timers_feed_later_stages():
    out: list = []
    timers = FakeTimers()
    chain = _chain(0, lambda when, event: out.append((when, event)), timers)
    reset = Toxic.create("reset_peer", timeout=200)
    latency = Toxic.create("latency", latency=100)
    chain.sync([reset, latency])
    chain.feed(b"data", 1.0)
    assert out == []  # reset_peer swallowed the data and set a timer
    timers.fire_all()
    assert out == [(1.2, Signal.RESET)]  # RESET is not delayed by latency


def test_removing_a_toxic_cancels_its_timer():
    out: list = []
    timers = FakeTimers()
    chain = _chain(0, lambda when, event: out.append((when, event)), timers)
    timeout = Toxic.create("timeout", timeout=100)
    chain.sync([timeout])
    assert chain.sync([]) is True
    timers.fire_all()
    assert out == []


def test_unchanged_toxics_keep_their_state():
    out: list = []
    chain = _chain(0, lambda when, event: out.append(event))
    limit = Toxic.create("limit_data", bytes=4)
    chain.sync([limit])
    chain.feed(b"ab", 0)
    assert chain.sync([limit]) is False
    chain.feed(b"cdef", 0)
    assert out == [b"ab", b"cd", Signal.CLOSE]


def test_toxic_json_defaults_and_errors():
    toxic = Toxic.from_json({"type": "latency", "attributes": {"latency": 5, "other": 1}})
    assert toxic.to_json() == {
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1.0,
        "attributes": {"latency": 5, "jitter": 0},
    }
    assert toxic.updated({"attributes": {"jitter": 2}}).attributes == {"latency": 5, "jitter": 2}
    with pytest.raises(errors.BadRequest, match="invalid toxic type"):
        Toxic.from_json({"type": "gremlins"})
    with pytest.raises(errors.BadRequest, match="stream was invalid"):
        Toxic.from_json({"type": "latency", "stream": "sideways"})
    with pytest.raises(errors.BadRequest):
        Toxic.from_json({"type": "latency", "attributes": {"latency": "slow"}})
