"""Serial devices in scenarios load strictly: ports, devices, plug steps, client steps.

Every mistake below stops the run at load, naming the file, the step and the
key; what loads comes back with the port's agent filled in, so the runner
never has to guess whose port a client meant.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tetherbed.simulator.cli import main as run
from tetherbed.simulator.scenario import ScenarioError, check_step, load, parse
from tetherbed.simulator.scenario.loader import check_topology
from tetherbed.simulator.validation import Where

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted((ROOT / "scenarios" / "serial_io").glob("*.yaml"))

BASE: dict[str, Any] = {
    "name": "serial",
    "topology": {
        "agents": {
            "laptop": {
                "session": "s",
                "options": {"serial": {"ttyTB0": {"baud": 9600, "sensors": {"temp": 21.5}}}},
            }
        },
        "clients": {"alice": {"session": "s"}},
    },
    "steps": [{"start": "hub"}, {"start": "laptop"}],
}


def with_steps(*steps: dict[str, Any], document: dict[str, Any] | None = None) -> dict[str, Any]:
    found = copy.deepcopy(document or BASE)
    found["steps"].extend(steps)
    return found


def with_device(**device: Any) -> dict[str, Any]:
    found = copy.deepcopy(BASE)
    found["topology"]["agents"]["laptop"]["options"]["serial"]["ttyTB0"] = device
    return found


def two_agents() -> dict[str, Any]:
    """Two agents of session s (laptop and desk), both with a ttyTB0."""
    found = copy.deepcopy(BASE)
    found["topology"]["agents"]["desk"] = {
        "session": "s",
        "options": {"serial": {"ttyTB0": {}, "ttyUSB1": {"baud": 115200}}},
    }
    found["topology"]["agents"]["other"] = {"session": "t", "options": {"serial": {"ttyX": {}}}}
    return found


def test_the_shipped_serial_scenarios_load_on_every_backend() -> None:
    assert [p.name for p in SHIPPED] == [
        "baud_mismatch.yaml",
        "through_the_hub.yaml",
        "unplugged_mid_read.yaml",
    ]
    for path in SHIPPED:
        for backend in ("sim", "process", "docker"):
            scenario = load(path, backend)
            assert backend in scenario.backends
            assert "serial_io" in scenario.checkers


def test_a_client_step_gets_its_ports_agent_and_the_device_its_defaults() -> None:
    scenario = parse(
        with_steps(
            {"serial_open": {"client": "alice", "id": "o", "port": "ttyTB0", "baud_rate": 9600}},
            {"serial_read": {"client": "alice", "id": "r", "port": "ttyTB0", "until": "\r\n"}},
            {"unplug": {"agent": "laptop", "port": "ttyTB0"}},
            {"plug": {"agent": "laptop", "port": "ttyTB0"}},
            {
                "expect": {
                    "client": "alice",
                    "id": "r",
                    "type": "SERIAL_DATA",
                    "code": "SERIAL_PORT_GONE",
                }
            },
        )
    )
    opened, read = scenario.steps[2], scenario.steps[3]
    assert opened.args == {
        "client": "alice",
        "id": "o",
        "port": "ttyTB0",
        "baud_rate": 9600,
        "agent": "laptop",
    }
    assert read.args["agent"] == "laptop" and read.args["until"] == "\r\n"
    device = scenario.topology.agents["laptop"].serial_ports["ttyTB0"]
    assert device == {"baud": 9600, "sensors": {"temp": 21.5}}


def test_agent_chooses_between_two_agents_of_the_session() -> None:
    ambiguous = with_steps(
        {"serial_open": {"client": "alice", "id": "o", "port": "ttyTB0"}}, document=two_agents()
    )
    with pytest.raises(ScenarioError, match=r"step 3 \(serial_open\): agents \['laptop', 'desk'\]"):
        parse(ambiguous)
    chosen = with_steps(
        {"serial_open": {"client": "alice", "id": "o", "port": "ttyTB0", "agent": "desk"}},
        {"serial_open": {"client": "alice", "id": "u", "port": "ttyUSB1"}},
        document=two_agents(),
    )
    steps = parse(chosen).steps
    assert steps[2].args["agent"] == "desk" and steps[3].args["agent"] == "desk"


MISTAKES = [
    pytest.param(
        with_device(bauds=9600),
        "topology.agents.laptop.options.serial.ttyTB0: unknown key 'bauds' (did you mean 'baud'?)",
        id="device-key-misspelt",
    ),
    pytest.param(
        with_device(baud=1234),
        "topology.agents.laptop.options.serial.ttyTB0.baud: expected 300 or 600",
        id="baud-no-device-runs-at",
    ),
    pytest.param(
        with_device(baud="9600"),
        "serial.ttyTB0.baud: expected 300 or 600",
        id="baud-as-text",
    ),
    pytest.param(
        with_device(sensors={"pressure": 1.0}),
        "serial.ttyTB0.sensors: unknown key 'pressure'",
        id="unknown-sensor",
    ),
    pytest.param(
        with_device(sensors={"uptime": 5}),
        "serial.ttyTB0.sensors: unknown key 'uptime'",
        id="uptime-cannot-be-pinned",
    ),
    pytest.param(
        with_device(sensors={"a0": 2000}),
        "serial.ttyTB0.sensors.a0: '2000' is out of range for a0",
        id="analog-pin-out-of-range",
    ),
    pytest.param(
        {
            **BASE,
            "topology": {
                **BASE["topology"],
                "agents": {"laptop": {"session": "s", "options": {"serial": {"../tty": {}}}}},
            },
        },
        "options.serial.../tty: expected a port name",
        id="port-name-with-a-path",
    ),
    pytest.param(
        with_steps({"serial_open": {"client": "alice", "id": "o", "port": "ttyTB1"}}),
        "step 3 (serial_open): port: no serial port 'ttyTB1' on the agents of session 's' "
        "(laptop) (declared: laptop:ttyTB0",
        id="undeclared-port",
    ),
    pytest.param(
        with_steps({"serial_read": {"client": "alice", "id": "r", "port": "ttyTB0", "timeout": 5}}),
        "step 3 (serial_read): unknown key 'timeout' (did you mean 'timeout_ms'?)",
        id="read-key-misspelt",
    ),
    pytest.param(
        with_steps(
            {"serial_read": {"client": "alice", "id": "r", "port": "ttyTB0", "timeout_ms": "1s"}}
        ),
        "step 3 (serial_read): timeout_ms: expected an integer, got '1s'",
        id="timeout-with-a-unit",
    ),
    pytest.param(
        with_steps(
            {
                "serial_write": {
                    "client": "alice",
                    "id": "w",
                    "port": "ttyTB0",
                    "data": "x",
                    "encoding": "base46",
                }
            }
        ),
        "step 3 (serial_write): encoding: unknown value 'base46' (did you mean 'base64'?)",
        id="unknown-encoding",
    ),
    pytest.param(
        with_steps({"serial_write": {"client": "alice", "id": "w", "port": "ttyTB0"}}),
        "step 3 (serial_write): `data` is required",
        id="write-without-data",
    ),
    pytest.param(
        with_steps(
            {"serial_close": {"client": "alice", "id": "c", "port": "ttyTB0", "agent": "ghost"}}
        ),
        "step 3 (serial_close): agent: no declared agent 'ghost'",
        id="undeclared-agent",
    ),
    pytest.param(
        with_steps({"unplug": {"agent": "laptop", "port": "ttyTB9"}}),
        "step 3 (unplug): port: no serial port 'ttyTB9' on laptop (declared: laptop:ttyTB0",
        id="unplug-undeclared-port",
    ),
    pytest.param(
        with_steps(
            {"unplug": {"agent": "laptop", "port": "ttyTB0"}},
            {"unplug": {"agent": "laptop", "port": "ttyTB0"}},
        ),
        "step 4 (unplug): laptop's ttyTB0 is unplugged already (plug it in first)",
        id="unplug-twice",
    ),
    pytest.param(
        with_steps({"plug": {"agent": "laptop", "port": "ttyTB0"}}),
        "step 3 (plug): laptop's ttyTB0 is plugged in already (every port starts plugged in)",
        id="plug-a-plugged-port",
    ),
    pytest.param(
        with_steps({"expect": {"client": "alice", "id": "r", "code": "SERIAL_PORT_GON"}}),
        "step 3 (expect): code: unknown value 'SERIAL_PORT_GON' (did you mean 'SERIAL_PORT_GONE'?)",
        id="unknown-serial-code",
    ),
]


@pytest.mark.parametrize(("document", "message"), MISTAKES)
def test_each_mistake_exits_2_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: dict, message: str
) -> None:
    path = tmp_path / "mistake.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert run([str(path), "--report", str(tmp_path / "reports")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tetherbed run: {path}: "), err
    assert message in err, err
    assert not (tmp_path / "reports").exists()  # nothing ran


def test_a_client_of_another_session_cannot_name_that_sessions_agent() -> None:
    document = two_agents()
    document["topology"]["clients"]["bob"] = {"session": "t"}
    with pytest.raises(ScenarioError, match="other serves session 't', not alice's 's'"):
        parse(
            with_steps(
                {"serial_open": {"client": "alice", "id": "o", "port": "ttyX", "agent": "other"}},
                document=document,
            )
        )
    steps = parse(
        with_steps({"serial_open": {"client": "bob", "id": "o", "port": "ttyX"}}, document=document)
    ).steps
    assert steps[2].args["agent"] == "other"


def test_the_python_api_checks_and_resolves_steps_the_same_way() -> None:
    topology = check_topology(BASE["topology"], Where("t").key("topology"))
    where = Where("testbed").at_step(1, "serial_read")
    args = check_step(
        "serial_read", {"client": "alice", "id": "r", "port": "ttyTB0"}, topology, "sim", where
    )
    assert args["agent"] == "laptop"
    with pytest.raises(ScenarioError, match="unknown key 'untill'"):
        check_step(
            "serial_read",
            {"client": "alice", "id": "r", "port": "ttyTB0", "untill": "\n"},
            topology,
            "sim",
            where,
        )
