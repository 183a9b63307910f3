"""The frame scheduler's sans-I/O cores: seeded holds, FIFO lanes, bounds, replays."""

from __future__ import annotations

import pytest

from tetherbed.simulator.proxy.scheduler import (
    BoundError,
    Decision,
    Frame,
    FrameKey,
    ReplaySchedule,
    ScheduleBound,
    SeededSchedule,
)
from tetherbed.simulator.proxy.scheduler.actions import Release, WakeAt


def frame(conn: int, direction: str, index: int, kind: str = "FILE_READ") -> Frame:
    return Frame(FrameKey("agent-w", conn, direction, index), kind, f"{direction}{index}")


def run(schedule, arrivals: list[tuple[float, Frame]], until: float = 60.0) -> list[Release]:
    """Feed arrivals at their times, waking the schedule when it asks."""
    released: list[Release] = []
    wake: float | None = None
    pending = sorted(arrivals, key=lambda item: item[0])
    while pending or wake is not None:
        if pending and (wake is None or pending[0][0] <= wake):
            at, item = pending.pop(0)
            actions = schedule.arrive(item, at)
        else:
            assert wake is not None
            at, wake = wake, None
            if at > until:
                break
            actions = schedule.wake(at)
        for action in actions:
            if isinstance(action, Release):
                released.append(action)
            elif isinstance(action, WakeAt):
                wake = action.when
    return released


def burst(connections: int = 3, per_lane: int = 4) -> list[tuple[float, Frame]]:
    return [
        (0.001 * i, frame(c, d, i))
        for c in range(connections)
        for d in ("up", "down")
        for i in range(per_lane)
    ]


def order(released: list[Release]) -> list[FrameKey]:
    return [r.frame.key for r in released]


def test_fifo_per_lane_and_every_frame_released_once():
    released = run(SeededSchedule(7, ScheduleBound(200, 100)), burst())
    keys = order(released)
    assert sorted(keys) == sorted(f.key for _, f in burst())
    for lane in {k.lane for k in keys}:
        indexes = [k.index for k in keys if k.lane == lane]
        assert indexes == sorted(indexes)
    assert [r.decision.n for r in released] == list(range(len(released)))


def test_same_seed_same_order_and_seeds_explore_orders():
    first = order(run(SeededSchedule(7, ScheduleBound(200, 100)), burst()))
    assert order(run(SeededSchedule(7, ScheduleBound(200, 100)), burst())) == first
    bound = ScheduleBound(200, 100)
    orders = {tuple(order(run(SeededSchedule(s, bound), burst()))) for s in range(20)}
    assert len(orders) >= 15


def test_a_lanes_holds_do_not_depend_on_other_lanes_traffic():
    alone = run(SeededSchedule(3, ScheduleBound(300, 100)), [(0.0, frame(0, "down", 0))])
    crowded = run(SeededSchedule(3, ScheduleBound(300, 100)), burst())
    hold = next(r.decision.hold for r in crowded if r.frame.key == frame(0, "down", 0).key)
    assert alone[0].decision.hold == hold


def test_holds_stay_within_the_time_bound():
    released = run(SeededSchedule(11, ScheduleBound(50, 100)), burst(connections=1, per_lane=1))
    for release in released:
        assert release.decision.hold is not None and 0 <= release.decision.hold <= 50
    # one frame per lane: it leaves exactly at its hold
    assert all(r.decision.why == "due" for r in released)


def test_count_bound_releases_the_earliest_due_at_once():
    released = run(SeededSchedule(5, ScheduleBound(10_000, 2)), burst(connections=1, per_lane=3))
    forced = [r for r in released if r.decision.why == "count"]
    assert len(forced) == 4  # six frames, at most two held
    assert all(len(r.decision.held) <= 2 for r in released)


def test_the_decision_names_what_was_held_with_it():
    schedule = SeededSchedule(1, ScheduleBound(1000, 16))
    schedule.arrive(frame(0, "down", 0), 0.0)
    schedule.arrive(frame(1, "up", 0), 0.0)
    releases = [a for a in schedule.wake(2.0) if isinstance(a, Release)]
    assert len(releases) == 2
    assert releases[0].decision.held == (releases[1].frame.key,)
    assert releases[1].decision.held == ()


def test_forget_drops_a_closed_connections_frames():
    schedule = SeededSchedule(1, ScheduleBound(1000, 16))
    schedule.arrive(frame(0, "down", 0), 0.0)
    schedule.forget("agent-w", 0)
    assert schedule.held_count("agent-w", 0, "down") == 0
    assert schedule.wake(5.0) == []


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        (None, ScheduleBound()),
        ("200ms", ScheduleBound(200)),
        ("0.25s", ScheduleBound(250)),
        ("300", ScheduleBound(300)),
        ("200ms,8", ScheduleBound(200, 8)),
    ],
)
def test_bounds_parse(text, bound):
    assert ScheduleBound.parse(text) == bound


@pytest.mark.parametrize("text", ["fast", "200ms,0", "200ms,x", "-5ms"])
def test_bad_bounds_are_refused(text):
    with pytest.raises(BoundError):
        ScheduleBound.parse(text)


# -- replay -----------------------------------------------------------------------


def log_of(*items: tuple[Frame, tuple[Frame, ...], float]) -> list[Decision]:
    return [
        Decision(n, t, f.key, f.kind, f.request_id, tuple(h.key for h in held))
        for n, (f, held, t) in enumerate(items)
    ]


def test_replay_enforces_the_logged_order_across_lanes():
    a, b, c = frame(0, "down", 0), frame(1, "up", 0), frame(0, "up", 0)
    log = log_of((b, (), 0), (c, (), 0), (a, (), 0))
    replay = ReplaySchedule(log, wait=5.0)
    released = run(replay, [(0.0, a), (0.01, c), (0.02, b)])
    assert order(released) == [b.key, c.key, a.key]
    assert replay.finish().diverged == 0
    assert replay.divergence.followed == 3


def test_replay_waits_for_the_frames_that_were_held_together():
    first, second = frame(0, "down", 0), frame(0, "down", 1)
    log = log_of((first, (second,), 0), (second, (), 0))
    released = run(ReplaySchedule(log, wait=1.0), [(0.0, first), (0.5, second)])
    assert [r.decision.t for r in released] == [500.0, 500.0]  # together, when both were there


def test_replay_gives_up_on_a_missing_frame_and_counts_it():
    gone, there = frame(0, "down", 0), frame(1, "down", 0)
    log = log_of((gone, (), 0), (there, (), 0))
    replay = ReplaySchedule(log, wait=0.2)
    released = run(replay, [(0.0, there)])
    assert order(released) == [there.key]
    assert released[0].decision.t == pytest.approx(200.0)
    assert replay.finish().missing == 1


def test_replay_passes_unexpected_and_changed_frames_and_says_so():
    logged = frame(0, "down", 0, "FILE_READ")
    replay = ReplaySchedule(log_of((logged, (), 0)), wait=1.0)
    surprise = frame(3, "up", 0, "STATUS")
    released = run(replay, [(0.0, surprise), (0.1, frame(0, "down", 0, "FILE_STAT"))])
    assert order(released) == [surprise.key, logged.key]
    assert released[0].decision.why == "unexpected"
    divergence = replay.finish()
    assert (divergence.unexpected, divergence.changed, divergence.missing) == (1, 1, 0)
