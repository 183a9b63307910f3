"""A `wss://` hub: the recorder re-originates TLS, and terminates it when given a
certificate; either way it reads every frame.

The stand-in hub serves TLS with a throwaway certificate for 127.0.0.1 made
with `openssl` (a Debian set-up package).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.third_party.targets import MINIMAL_AGENT, standin_hub
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import parse

pytestmark = pytest.mark.e2e

OUT = "over tls\n"
SCENARIO = {
    "name": "a command over wss",
    "checkers": ["exactly_one_answer", "single_owner"],
    "topology": {
        "agents": {"w": {"session": "s", "options": {"shell": True}}},
        "clients": {"alice": {"session": "s"}},
    },
    "steps": [
        {"start": "hub"},
        {"start": "w"},
        {"expect": {"agent": "w", "state": "connected"}},
        {
            "send": {
                "client": "alice",
                "id": "c1",
                "type": "EXECUTE_COMMAND",
                "payload": {"command": "echo over tls"},
            }
        },
        {
            "expect": {
                "client": "alice",
                "id": "c1",
                "outcome": "ok",
                "value": {"stdout": "over tls\n"},
            }
        },
        {
            "expect": {
                "event": "frame",
                "process": "wire:w",
                "value": {"dir": "down", "type": "EXECUTE_COMMAND"},
            }
        },
    ],
}


def certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    command = [
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
    ]
    subprocess.run(
        [*command, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True
    )
    return cert, key


@pytest.mark.parametrize("terminate", [False, True], ids=["agent-side", "terminated"])
def test_a_wss_hub_is_recorded_frame_by_frame(tmp_path: Path, terminate: bool) -> None:
    cert, key = certificate(tmp_path)
    tls = {"ca": str(cert), "cert": str(cert), "key": str(key)} if terminate else {"ca": str(cert)}
    agent = MINIMAL_AGENT + (f" --ca {cert}" if terminate else "")
    target = standin_hub("--tls-cert", str(cert), "--tls-key", str(key), agent=agent, tls=tls)
    outcome = run_scenario(parse(SCENARIO), "process", 1, tmp_path / "run", target=target)
    assert outcome.ok, (outcome.error, outcome.step_failure, outcome.verdicts)
    opens = [r for r in outcome.history if r.process == "wire:w" and r.f == "open"]
    kinds = {r.value.get("type") for r in outcome.history if r.f == "frame"}
    assert opens and {"HELLO", "HELLO_ACK", "EXECUTE_COMMAND", "COMMAND_RESULT"} <= kinds
