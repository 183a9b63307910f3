"""Smoke runs of every `tetherbed load` profile, as a user runs them (the command, headless).

Each run is short; what is checked is what the issue asks of a smoke run:
more than zero requests of every type, zero failures (Locust's own totals),
and the profile's figure printed. One relay run uses `--workers 2` (Locust's
distributed mode), one runs against real agent processes behind a hub started
separately, and one takeover run against a hub with a deliberate defect
proves the recording's judgement can fail. No figure is compared with a
wall-clock bound.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tetherbed.launch import start_hub
from tetherbed.simulator.targets.running import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def load(out: Path, *args: str) -> tuple[int, dict, dict[tuple[str, str], tuple[int, int]], str]:
    """Run `tetherbed load ARGS --out OUT`: exit status, summary.json, Locust's
    (type, name) → (requests, failures), and the printed summary."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tetherbed", "load", *args, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        stdout, _ = process.communicate(timeout=220)
    except subprocess.TimeoutExpired:
        process.terminate()  # it stops what it started (hub, recorder, Locust) on SIGTERM
        stdout, _ = process.communicate(timeout=60)
    summary = (
        json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    )
    counts: dict[tuple[str, str], tuple[int, int]] = {}
    stats = out / "locust" / "locust_stats.csv"
    if stats.exists():
        with stats.open() as rows:
            for row in csv.DictReader(rows):
                counts[row["Type"], row["Name"]] = (
                    int(row["Request Count"]),
                    int(row["Failure Count"]),
                )
    return process.returncode, summary, counts, stdout


def every_type_ran_without_failure(
    counts: dict[tuple[str, str], tuple[int, int]], wanted: list[tuple[str, str]], output: str
) -> None:
    for key in wanted:
        assert counts.get(key, (0, 0))[0] > 0, (key, counts, output)
    total = counts.get(("", "Aggregated"))
    assert total is not None and total[1] == 0, (counts, output)


MIX = [("ws", "FILE_STAT"), ("ws", "FILE_READ"), ("ws", "EXECUTE_COMMAND")]


def test_relay_with_two_workers_steps_to_a_knee_and_compares_with_an_echo(tmp_path: Path) -> None:
    code, summary, counts, output = load(
        tmp_path / "relay",
        "relay",
        "--users", "4", "--agents", "2", "--workers", "2",
        "--step", "--steps", "2", "--step-seconds", "4", "--echo-seconds", "1",
        "--fail-if", "errors>0",
    )  # fmt: skip
    assert code == 0, output
    every_type_ran_without_failure(counts, [*MIX, ("agent", "connect")], output)
    assert summary["metrics"]["knee_rps"] > 0, output
    assert summary["metrics"]["echo_ratio"] > 0, output
    assert "knee:" in output and "raw websockets echo" in output
    assert "Locust process(es)" in output  # the generator's CPU line
    assert (tmp_path / "relay" / "plot.svg").read_text().startswith("<svg")
    assert (tmp_path / "relay" / "locust" / "report.html").exists()


def test_relay_with_a_master_and_a_worker_started_apart(tmp_path: Path) -> None:
    """What docs/load.md shows for several machines, on one: the worker gets
    only the master's address; the plan comes with the master's spawn message."""
    port = str(free_port())
    worker = subprocess.Popen(
        [
            sys.executable, "-m", "tetherbed", "load", "relay", "--worker",
            "--master-host", "127.0.0.1", "--master-port", port, "--out", str(tmp_path / "worker"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        code, _, counts, output = load(
            tmp_path / "master",
            "relay",
            "--master", "--expect-workers", "1", "--master-bind", "127.0.0.1",
            "--master-port", port,
            "--users", "2", "--agents", "1", "--duration", "3", "--echo-seconds", "0",
        )  # fmt: skip
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    assert code == 0, output
    every_type_ran_without_failure(counts, [*MIX, ("agent", "connect")], output)


def test_relay_against_real_agents_behind_a_hub_started_separately(tmp_path: Path) -> None:
    hub = start_hub(tmp_path / "hub-state")
    try:
        tokens = tmp_path / "tokens.yaml"
        tokens.write_text(
            yaml.safe_dump(
                {"ops": {"agent": hub.token("ops", "agent"), "client": hub.token("ops", "client")}}
            )
        )
        code, summary, counts, output = load(
            tmp_path / "relay",
            "relay",
            "--hub-url", hub.url, "--hub-tokens", str(tokens),
            "--agents", "0", "--real-agents", "2", "--users", "4",
            "--duration", "5", "--echo-seconds", "0", "--rate", "120",
        )  # fmt: skip
    finally:
        hub.stop()
    assert code == 0, output
    every_type_ran_without_failure(counts, [*MIX, ("client", "session served")], output)
    assert "2 real agent(s)" in output and "open loop, 120 req/s" in output
    assert summary["figures"]["requests"]["requests"] > 0


def test_storm_every_session_is_served_again_and_none_is_lost(tmp_path: Path) -> None:
    code, summary, counts, output = load(
        tmp_path / "storm", "storm", "--users", "30", "--drop-seconds", "1"
    )
    assert code == 0, output
    every_type_ran_without_failure(counts, [("agent", "connect"), ("agent", "reconnect")], output)
    assert summary["metrics"]["lost"] == 0
    assert summary["figures"]["storm"]["served_again"] == 30
    assert summary["metrics"]["recovery_s"] >= 0
    assert "hub memory per agent connection" in output


def test_takeover_loses_no_request_and_answers_none_twice(tmp_path: Path) -> None:
    code, summary, counts, output = load(
        tmp_path / "takeover",
        "takeover",
        "--duration", "8", "--sessions", "2", "--challengers", "1", "--users", "4",
        "--takeover-every", "1", "--challenge-every", "1",
    )  # fmt: skip
    assert code == 0, output
    every_type_ran_without_failure(
        counts, [*MIX, ("agent", "takeover"), ("agent", "challenge (refused)")], output
    )
    assert summary["metrics"]["lost"] == 0 and summary["metrics"]["twice"] == 0
    assert summary["metrics"]["takeovers_per_s"] > 0
    verdicts = summary["figures"]["verdicts"]
    for name in ("exactly_one_answer", "no_double_execution", "no_crossed_answers"):
        assert verdicts[name]["status"] == "pass", (name, verdicts[name])


def test_takeover_catches_a_hub_that_orphans_requests(tmp_path: Path) -> None:
    """Mutation: a hub that drops what the replaced connection held (the
    `orphan_on_disconnect` defect) fails the run, from the recording."""
    code, summary, _, output = load(
        tmp_path / "orphans",
        "takeover",
        "--duration", "6", "--sessions", "2", "--challengers", "0", "--users", "4",
        "--takeover-every", "1", "--request-timeout", "3",
        "--hub-arg=--defect=orphan_on_disconnect",
    )  # fmt: skip
    assert code == 1, output
    assert summary["metrics"]["lost"] > 0, output
    assert summary["figures"]["verdicts"]["exactly_one_answer"]["status"] == "fail"


@pytest.mark.xvfb
def test_video_fast_viewers_keep_their_rate_beside_a_stalled_one(tmp_path: Path) -> None:
    code, summary, counts, output = load(
        tmp_path / "video",
        "video",
        "--users", "2", "--slow", "1", "--phase-seconds", "3", "--size", "640x360",
    )  # fmt: skip
    assert code == 0, output
    every_type_ran_without_failure(
        counts,
        [
            ("video", "frame (fast 1)"),
            ("video", "frame (fast 2)"),
            ("video", "frame (slow 1)"),
            ("video", "frame (stalled 1)"),
            ("video", "open (stalled)"),
        ],
        output,
    )
    assert summary["metrics"]["fps_ratio"] > 0
    assert "with a stalled viewer ÷ without" in output
    assert summary["figures"]["adapter_rss_mib_peak"] > 0
