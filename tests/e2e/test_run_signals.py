"""SIGTERM or SIGINT to `tetherbed run` stops every process it started.

What a CI cancel, `timeout` and Ctrl-C send. Before, SIGTERM killed the runner
and left its agents redialling a hub that was gone, forever, and Ctrl-C
printed a long traceback. Now the scenario in progress is cancelled, its
teardown stops the hub, the agents and the proxies, the partial report is
written and the exit status is 128 + the signal's number.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e

LONG = {
    "name": "long enough to be interrupted",
    "description": "Two agents serve their sessions for ten minutes.",
    "topology": {
        "agents": {"one": {"session": "s1"}, "two": {"session": "s2"}},
        "clients": {"alice": {"session": "s1"}},
    },
    "steps": [
        {"start": "hub"},
        {"start": "one"},
        {"start": "two"},
        {"expect": {"agent": "one", "state": "connected"}},
        {"expect": {"agent": "two", "state": "connected"}},
        {"send": {"client": "alice", "id": "w1", "type": "FILE_WRITE",
                  "payload": {"path": "a.txt", "content": "x"}}},
        {"wait": 600},
    ],
}  # fmt: skip


def processes_mentioning(marker: str) -> list[tuple[int, str]]:
    """Live processes whose command line mentions `marker` (the run's own folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append((int(entry.name), cmdline))
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_every_process_of_the_run_and_writes_the_partial_report(
    tmp_path: Path, signum: int
) -> None:
    scenario = tmp_path / "long.yaml"
    scenario.write_text(yaml.safe_dump(LONG, sort_keys=False))
    workdirs = tmp_path / "tmp"  # every part's folders (and so command lines) are in here
    workdirs.mkdir()
    report = tmp_path / "report"
    run = subprocess.Popen(
        [sys.executable, "-m", "tetherbed", "run", str(scenario), "--backend", "process",
         "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(workdirs)},
        start_new_session=True,  # as a CI runner's child: nothing else gets the signal
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(processes_mentioning(str(workdirs))) < 3:  # the hub and both agents
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the run's parts did not start"
            time.sleep(0.1)
        # Into the long wait: the client connects only once both agents are
        # connected (the steps before it), and the hub journals that.
        while not any(
            "client_connect" in events.read_text()
            for events in workdirs.glob("**/hub-events.jsonl")
        ):
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the scenario did not reach its client"
            time.sleep(0.1)
        started = processes_mentioning(str(workdirs))
        run.send_signal(signum)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 128 + signum, out + err
    assert "Traceback" not in err
    assert f"stopped by {signal.Signals(signum).name}" in err
    left = processes_mentioning(str(workdirs))
    assert left == [], f"left running: {left} (started: {started})"
    (result,) = json.loads((report / "results.json").read_text())["runs"]
    assert result["verdict"] == "error"
    assert f"stopped by {signal.Signals(signum).name}" in result["error"]
    history = (report / "long-enough-to-be-interrupted-process" / "history.jsonl").read_text()
    assert '"f":"connected"' in history  # what happened before the signal is kept
    assert (report / "junit.xml").is_file()
