"""The serial I/O scenarios (scenarios/serial_io/): through the hub, a device
unplugged mid-read, a baud mismatch — in virtual time on sim, with socat ports
and simulated-device processes on process, and not applicable to a
third-party agent that does not negotiate the extension."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.third_party.targets import MINIMAL_AGENT
from tetherbed.agent.hardware import SerialPorts
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import load

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "scenarios" / "serial_io"
SCENARIOS = sorted(FOLDER.glob("*.yaml"))


def _run(report: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = subprocess.run(
        [sys.executable, "-m", "tetherbed", "run", *args, "--strict", "--report", str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert (report / "results.json").is_file(), done.stdout[-4000:] + done.stderr[-2000:]
    return done, json.loads((report / "results.json").read_text())


def _all_pass(done: subprocess.CompletedProcess[str], document: dict) -> None:
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    runs = document["runs"]
    assert len(runs) == len(SCENARIOS) == 3
    for run in runs:
        assert run["verdict"] == "pass", run
        serial = next(v for v in run["verdicts"] if v["name"] == "serial_io")
        assert serial["ok"] and "answered as the ports' states allow" in serial["summary"]


def _history(report: Path, name: str) -> list[dict]:
    (path,) = report.glob(f"{name}-*/history.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _gone_mid_read(history: list[dict]) -> None:
    """The unplug scenario's evidence, from the wire: the agent's SERIAL_PORT_GONE
    carried the PONG it had read, and the client got exactly that."""
    (answer,) = [
        r
        for r in history
        if r["process"] == "client:alice" and r["req"] == "waiting" and r["type"] != "invoke"
    ]
    assert answer["type"] == "fail" and answer["value"]["received_text"] == "PONG\r\n"
    sent = [
        r
        for r in history
        if r["process"] == "wire:laptop"
        and r["f"] == "frame"
        and r["value"].get("digest") == answer["value"]["digest"]
    ]
    assert len(sent) == 1 and sent[0]["value"]["payload"]["details"]["received_bytes"] == 6
    assert [r["f"] for r in history if r["process"] == "serial:laptop"] == ["unplugged", "plugged"]


def test_on_sim_deterministically(tmp_path: Path) -> None:
    """In virtual time: every scenario passes, and twice gives the same history."""
    for path in SCENARIOS:
        scenario = load(path, "sim")
        first, second = (
            run_scenario(scenario, "sim", scenario.seed, tmp_path / f"{path.stem}-{n}")
            for n in range(2)
        )
        assert first.verdict == "pass", (path.name, first.error, first.failure, first.verdicts)
        assert [r.to_json() for r in first.history] == [r.to_json() for r in second.history]
        if path.stem == "unplugged_mid_read":
            _gone_mid_read([r.to_dict() for r in first.history])


def test_an_agent_that_reads_a_closed_port_is_caught_from_the_wire(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A deliberately broken agent answers a read of a closed port with empty
    data instead of SERIAL_PORT_NOT_OPEN: the scenario's step and the serial_io
    checker both fail, and the checker blames the answer on the agent's link."""
    held = SerialPorts._held

    def careless(self: SerialPorts, path: str):  # type: ignore[no-untyped-def]
        try:
            return held(self, path)
        except Exception:
            return _Silent()

    monkeypatch.setattr(SerialPorts, "_held", careless)
    scenario = load(FOLDER / "through_the_hub.yaml", "sim")
    outcome = run_scenario(scenario, "sim", scenario.seed, tmp_path)
    assert outcome.verdict == "fail"
    assert outcome.failure is not None and "outcome ok" in outcome.failure
    serial = next(v for v in outcome.verdicts if v.name == "serial_io")
    assert serial.failed and "which is not open on this connection" in serial.summary
    blamed = {e["role"]: e for e in serial.evidence}
    assert blamed["the answer"]["process"] == "wire:laptop"
    assert blamed["the answer"]["value"]["type"] == "SERIAL_DATA"
    assert blamed["what closed it"]["value"]["type"] == "ACK"


class _Silent:
    """An open port that is not there: reads answer nothing (the defect)."""

    def __init__(self) -> None:
        import asyncio

        self.lock = asyncio.Lock()
        self.pending = bytearray()
        self.line = self

    async def read(self, request, pending):  # type: ignore[no-untyped-def]
        return b"", True

    async def write(self, data):  # type: ignore[no-untyped-def]
        return len(data)

    async def close(self) -> None:
        return None


@pytest.mark.e2e
@pytest.mark.xdist_group("process-scenarios")
def test_on_process(tmp_path: Path) -> None:
    """Real socat ports and simulated-device processes, stopped by PID."""
    done, document = _run(tmp_path, str(FOLDER), "--backend", "process")
    _all_pass(done, document)
    _gone_mid_read(_history(tmp_path, "serial-device-unplugged-mid-read"))


@pytest.mark.e2e
@pytest.mark.xdist_group("process-scenarios")
def test_not_applicable_to_an_agent_without_the_extension(tmp_path: Path) -> None:
    """The independent minimal agent knows no serial extension: the scenario says
    so (n/a, exit 0, JUnit skipped) instead of passing or failing, and nothing
    of the extension ever reached it."""
    done, document = _run(
        tmp_path,
        str(FOLDER / "unplugged_mid_read.yaml"),
        "--backend",
        "process",
        "--agent-command",
        MINIMAL_AGENT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "  n/a " in done.stdout and "1 not applicable" in done.stdout
    (run,) = document["runs"]
    assert run["verdict"] == "not_applicable"
    assert "laptop's HELLO does not offer the serial I/O extension" in run["inapplicable"]
    assert document["summary"]["not_applicable"] == 1
    skipped = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase/skipped")
    assert skipped is not None and "does not offer" in skipped.get("message", "")
    history = _history(tmp_path, "serial-device-unplugged-mid-read")
    assert not [r for r in history if str(r["value"].get("type", "")).startswith("SERIAL_")]
