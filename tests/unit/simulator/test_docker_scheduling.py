"""The docker backend's side of frame scheduling, without Docker: the links'
`tetherbed proxy` options and the merge of their decision logs."""

from __future__ import annotations

from pathlib import Path

from tetherbed.simulator.backends.docker.scheduling import (
    link_arguments,
    link_log,
    merge_link_logs,
    prepare_replay,
)
from tetherbed.simulator.proxy.cli import build_parser
from tetherbed.simulator.proxy.scheduler import (
    Decision,
    DecisionLog,
    FrameKey,
    ScheduleBound,
    ScheduleOptions,
)
from tetherbed.simulator.proxy.scheduler.decisions import DecisionWriter

LINK = ["--proxy", "link=127.0.0.1:18765=hub:8765"]


def test_the_links_options_are_the_proxy_commands_own():
    explore = link_arguments(ScheduleOptions.explore("300ms,4"), 9, "worker")
    args = build_parser().parse_args([*LINK, *explore])
    assert ScheduleBound.parse(args.schedule) == ScheduleBound(300, 4)
    assert args.schedule_seed == 9 and args.schedule_as == [("link", "agent-worker")]
    assert args.decisions == Path("/logs") / link_log("worker")
    assert link_arguments(None, 9, "worker") == []


def test_a_replay_hands_the_log_to_the_links(tmp_path: Path):
    recorded = tmp_path / "recorded.jsonl"
    DecisionWriter(recorded, {"schedule": "explore", "seed": 3}).close()
    options = ScheduleOptions.replaying(recorded, wait=0.5)
    logs = tmp_path / "logs"
    logs.mkdir()
    prepare_replay(options, logs)
    args = build_parser().parse_args([*LINK, *link_arguments(options, 3, "worker")])
    assert (logs / args.replay.name).read_text() == recorded.read_text()
    assert args.replay_wait == 0.5 and args.schedule is None


def _link_log(logs: Path, agent: str, times: list[float], summary: bool) -> None:
    writer = DecisionWriter(logs / link_log(agent), {"schedule": "replay", "seed": 1})
    for n, t in enumerate(times):
        key = FrameKey(f"agent-{agent}", 0, "down", n)
        writer.write(Decision(n, t, key, "FILE_READ", str(n), why="replay"))
    if summary:
        writer.summary(
            {"released": len(times), "divergence": {"followed": len(times), "missing": 1}}
        )
    writer.close()


def test_the_links_logs_merge_by_time_into_one_run_log(tmp_path: Path):
    _link_log(tmp_path, "a", [1.0, 5.0], summary=True)
    _link_log(tmp_path, "b", [3.0], summary=True)
    out = tmp_path / "decisions.jsonl"
    report = merge_link_logs(tmp_path, ["a", "b"], out, {"schedule": "replay", "seed": 1})
    assert report["released"] == 3 and report["divergence"] == {"followed": 3, "missing": 2}
    assert "incomplete" not in report
    merged = DecisionLog.read(out)
    assert [(d.n, d.key.link) for d in merged.decisions] == [
        (0, "agent-a"),
        (1, "agent-b"),
        (2, "agent-a"),
    ]
    assert merged.summary == {"released": 3, "divergence": {"followed": 3, "missing": 2}}


def test_a_link_killed_before_its_summary_is_said_so(tmp_path: Path):
    _link_log(tmp_path, "a", [1.0], summary=False)
    report = merge_link_logs(tmp_path, ["a", "gone"], None, {"schedule": "explore"})
    assert report["released"] == 1 and "incomplete" in report


def test_the_link_container_runs_the_proxy_command_with_them(tmp_path: Path):
    from tetherbed.simulator.backends.docker.containers import link_container
    from tetherbed.simulator.scenario import parse

    scenario = parse(
        {
            "name": "one agent",
            "topology": {"agents": {"worker": {"machine": "m1", "session": "s1"}}},
            "steps": [{"start": "hub"}],
        }
    )
    spec = scenario.topology.agents["worker"]
    schedule = link_arguments(ScheduleOptions.explore("600ms"), 5, "worker")
    container = link_container("image", "run", spec, 7, None, logs=tmp_path, schedule=schedule)  # type: ignore[arg-type]
    command = list(container._command)  # type: ignore[attr-defined]
    assert command[:2] == ["tetherbed", "proxy"]
    args = build_parser().parse_args(command[2:])
    assert args.schedule == "600ms,16" and args.schedule_seed == 5
    assert args.record == [("link", "worker", "/logs/wire-worker.jsonl")]
