"""Reading a run back: per-second figures, stages, steps, the storm's watch, the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tetherbed.load.analysis.plot import render
from tetherbed.load.analysis.storm import StormWatch
from tetherbed.load.analysis.timeline import (
    Second,
    Window,
    figures,
    percentile,
    read_stages,
    read_timeline,
)
from tetherbed.load.plan import Plan, Stage
from tetherbed.load.profiles.relay import StepFigures, client_steps


def second(t: int, n: int, ms: float, failures: int = 0, name: str = "FILE_STAT") -> Second:
    return Second(t, "ws", name, n, failures, n * ms, ((ms, n),))


def test_figures_count_only_the_whole_seconds_inside_a_window() -> None:
    rows = [second(100, 10, 1.0), second(101, 20, 2.0), second(102, 30, 40.0, failures=3)]
    found = figures(rows, 100.5, 103.0)  # second 100 is cut: left out
    assert found.requests == 50
    assert found.failures == 3
    assert found.seconds == 2
    assert found.rps == 25
    assert found.p50_ms == 40.0  # 20 at 2 ms, 30 at 40 ms
    assert found.p99_ms == 40.0
    assert math.isnan(figures([], 0, 10).p99_ms)


def test_percentiles_come_from_the_merged_histogram() -> None:
    histogram = {1.0: 98, 10.0: 1, 100.0: 1}
    assert percentile(histogram, 0.5) == 1.0
    assert percentile(histogram, 0.99) == 10.0
    assert percentile(histogram, 1.0) == 100.0


def test_the_timeline_and_stages_files_round_trip(tmp_path: Path) -> None:
    (tmp_path / "timeline.jsonl").write_text(
        json.dumps(
            {"t": 5, "type": "ws", "name": "FILE_STAT", "count": 2, "failures": 0,
             "ms_sum": 3.0, "histogram": [[1.0, 1], [2.0, 1]]}
        )
        + "\n"
    )  # fmt: skip
    (tmp_path / "stages.json").write_text(
        json.dumps(
            {
                "stages": [
                    {"name": "step 1", "users": 2, "seconds": 5, "start": 10.0},
                    {"name": "step 2", "users": 4, "seconds": 5, "start": 15.2},
                ],
                "ended": 20.1,
            }
        )
    )
    (row,) = read_timeline(tmp_path)
    assert row.histogram == ((1.0, 1), (2.0, 1))
    first, last = read_stages(tmp_path)
    assert (first.start, first.end, last.end) == (10.0, 15.2, 20.1)


def test_steps_ramp_evenly_and_the_knee_needs_a_p99_under_the_bound_and_no_failure() -> None:
    assert client_steps(10, 4) == [3, 5, 8, 10]
    assert client_steps(2, 6) == [1, 2]
    window = Window("step", 1, 0.0, 1.0)
    fast = figures([second(1, 100, 5.0)])
    slow = figures([second(1, 300, 80.0)])
    failing = figures([second(1, 200, 5.0, failures=1)])
    assert StepFigures(window, 1, fast).within(50)
    assert not StepFigures(window, 1, slow).within(50)
    assert not StepFigures(window, 1, failing).within(50)


def test_the_storm_watch_times_the_hub_apart_from_the_agents_backoff() -> None:
    watch = StormWatch(sessions=2)

    def conn(n: int, session: str, t: float, *, hello_ack: bool = True) -> list[dict]:
        c = f"load#{n}"
        records = [
            {"t": t, "event": "connect", "conn": c},
            {"t": t + 0.001, "event": "upgrade", "conn": c, "session": session},
            {"t": t + 0.011, "event": "open", "conn": c, "session": session},
            {"t": t + 0.051, "event": "frame", "conn": c, "session": session, "dir": "up",
             "type": "HELLO"},
        ]  # fmt: skip
        if hello_ack:
            records.append(
                {"t": t + 0.071, "event": "frame", "conn": c, "session": session, "dir": "down",
                 "type": "HELLO_ACK"}
            )  # fmt: skip
        return records

    watch.feed(conn(1, "s1", 1.0) + conn(2, "s2", 1.2))
    assert watch.all_served and not watch.all_served_again
    watch.drop_at, watch.heal_at = 5.0, 7.0
    refused = {"t": 7.5, "event": "refused", "conn": "load#3", "status": 503}
    watch.feed([*conn(3, "s1", 7.4, hello_ack=False), refused])
    watch.feed(conn(4, "s1", 8.0) + conn(5, "s2", 10.0))
    assert watch.all_served_again
    assert watch.served_again == {"s1": 8.071, "s2": 10.071}
    # 10 ms to the 101 plus 20 ms from HELLO to HELLO_ACK; the 40 ms between is the agent's
    assert watch.accept_seconds["s1"] == pytest.approx(0.030)
    assert watch.refused == {503: 1}
    assert watch.first_attempt["s1"] == pytest.approx(7.401)


def test_the_plot_draws_both_panels_and_the_stages() -> None:
    rows = [second(t, 100 + t, 1.0 + t) for t in range(10)]
    svg = render(rows, [Window("step 1", 2, 0, 5), Window("step 2", 4, 5, 10)], title="t")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count("<polyline") == 3  # answers/s, p50, p99 (no failure: no red line)
    assert "step 2" in svg
    assert "no requests" in render([], [], title="t")


def test_the_plan_travels_as_json() -> None:
    plan = Plan(
        profile="relay",
        agent_url="ws://a",
        client_url="ws://c",
        user="load",
        agent_token="at",
        client_token="ct",
        session_prefix="relay-1",
        load_agents=3,
        real_sessions=["r0"],
        stages=[Stage("run", 5, 10.0, ["RelayClient"])],
    )
    again = Plan.decode(plan.encode())
    assert again == plan
    assert again.client_sessions() == ["relay-1-00000", "relay-1-00001", "relay-1-00002", "r0"]
