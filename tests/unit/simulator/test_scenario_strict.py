"""Scenarios cannot pass by accident: every mistake stops `tetherbed run` at load.

Each row is one mistake a person makes in a scenario file. Before loading was
strict, some were ignored (a fault's `latency` for `latency_ms` turned the
fault off and the scenario passed) and others crashed mid-run with a
traceback. Now each exits 2 before anything starts, with one line that names
the file, the step and the key.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tetherbed.simulator.cli import main as run

BASE: dict[str, Any] = {
    "name": "strict",
    "topology": {
        "agents": {"laptop": {"session": "s"}},
        "clients": {"alice": {"session": "s"}},
    },
    "steps": [{"start": "hub"}, {"start": "laptop"}],
}


def with_step(step: dict[str, Any]) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    document["steps"].append(step)
    return document


def changed(path: str, value: Any) -> dict[str, Any]:
    """BASE with the key at `path` (dotted) set to `value`."""
    document = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = document
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return document


MISTAKES = [
    pytest.param(
        with_step({"fault": {"agent": "laptop", "kind": "latency", "latency": 500}}),
        "sim",
        "step 3 (fault): unknown key 'latency' (did you mean 'latency_ms'?)",
        id="fault-key-misspelt",
    ),
    pytest.param(
        changed("topology.agents.laptop.options", {"shel": True}),
        "sim",
        "topology.agents.laptop.options: unknown key 'shel' (did you mean 'shell'?)",
        id="deep-unknown-key",
    ),
    pytest.param(
        with_step({"expect": {"client": "alice", "id": "r1", "outcom": "ok"}}),
        "sim",
        "step 3 (expect): unknown key 'outcom' (did you mean 'outcome'?)",
        id="expect-key-misspelt",
    ),
    pytest.param(
        changed("checkers", ["single_owners"]),
        "sim",
        "checkers.0: no checker 'single_owners' (did you mean 'single_owner'?)",
        id="unknown-checker",
    ),
    pytest.param(
        changed("checker_options", {"backoff_bounds": {"late_tolerence": 2}}),
        "sim",
        "checker_options.backoff_bounds: unknown key 'late_tolerence'",
        id="unknown-checker-option",
    ),
    pytest.param(
        with_step({"fault": {"agent": "laptop", "kind": "partition_all"}}),
        "sim",
        "step 3 (fault): kind: unknown kind 'partition_all'",
        id="unknown-fault-kind",
    ),
    pytest.param(
        with_step({"expect": {"agent": "laptop", "state": "online"}}),
        "sim",
        "step 3 (expect): state: unknown value 'online'",
        id="unknown-state",
    ),
    pytest.param(
        with_step({"expect": {"agent": "laptop", "state": "connected", "within": "10s"}}),
        "sim",
        "step 3 (expect): within: expected a number of seconds, got '10s'",
        id="within-with-a-unit",
    ),
    pytest.param(
        changed("topology.hub.url", "ws://127.0.0.1:9"),
        "sim",
        "topology.hub.url: not supported on the sim backend (only on process)",
        id="hub-url-on-sim",
    ),
    pytest.param(
        with_step({"fault": {"agent": "laptop", "kind": "loss", "percent": 5}}),
        "process",
        "step 3 (fault): kind: loss is not supported on the process backend (only on docker)",
        id="loss-outside-docker",
    ),
    pytest.param(
        changed("topology.agents.laptop.command", ["my-shim", "{hub_url}"]),
        "sim",
        "topology.agents.laptop.command: not supported on the sim backend",
        id="agent-command-on-sim",
    ),
    pytest.param(
        with_step({"send": {"client": "bob", "id": "r1", "type": "FILE_READ"}}),
        "sim",
        "step 3 (send): client: no declared client 'bob'",
        id="undeclared-client",
    ),
    pytest.param(
        with_step({"fault": {"agent": "laptop", "kind": "drop", "types": ["FILE_CONTENT"]}}),
        "sim",
        "step 3 (fault): types.0: unknown value 'FILE_CONTENT' (did you mean 'FILE_CONTENTS'?)",
        id="unknown-message-type",
    ),
    pytest.param(
        with_step({"wait": "5s"}),
        "sim",
        "step 3 (wait): expected a number of seconds, got '5s'",
        id="wait-with-a-unit",
    ),
]


@pytest.mark.parametrize(("document", "backend", "message"), MISTAKES)
def test_each_mistake_exits_2_at_load_naming_file_step_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: dict, backend: str, message: str
) -> None:
    path = tmp_path / "mistake.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    report = tmp_path / "reports"
    code = run([str(path), "--backend", backend, "--report", str(report)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"tetherbed run: {path}: {message}" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert not report.exists(), "nothing ran"


def test_a_folder_without_scenarios_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("not a scenario")
    assert run([str(tmp_path)]) == 2
    assert "no scenarios here" in capsys.readouterr().err


def test_a_path_that_does_not_exist_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([str(tmp_path / "nope.yaml")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_a_scenario_for_other_backends_is_skipped_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    third_party = changed("topology.hub.url", "ws://127.0.0.1:9")
    third_party["backends"] = ["process"]
    (tmp_path / "a_third_party.yaml").write_text(yaml.safe_dump(third_party))
    (tmp_path / "b_plain.yaml").write_text(yaml.safe_dump({**BASE, "name": "plain"}))
    assert run([str(tmp_path), "--report", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "skip" in out and "strict (runs on process only)" in out
    # When nothing at all runs on the backend, the run is a mistake too.
    assert run([str(tmp_path / "a_third_party.yaml"), "--report", str(tmp_path / "r")]) == 2
    assert "runs on the sim backend" in capsys.readouterr().err
