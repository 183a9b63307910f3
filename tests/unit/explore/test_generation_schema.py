"""`generate:` and `nemesis:` are checked as strictly as the rest of a scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tetherbed.simulator.scenario import ScenarioError, parse
from tetherbed.simulator.scenario.generation import NEMESIS_KINDS

TOPOLOGY = {
    "agents": {
        "a1": {"machine": "a", "session": "s", "options": {"shell": True}},
        "a2": {"machine": "a", "session": "s"},
        "b1": {"machine": "b", "session": "s"},
    },
    "clients": {"alice": {"session": "s"}},
}


def _doc(**extra: Any) -> dict[str, Any]:
    return {
        "name": "generated",
        "topology": TOPOLOGY,
        "generate": {"duration": 5, "clients": {"alice": {"rate": 1}}},
        **extra,
    }


def test_a_generated_scenario_loads_with_its_defaults() -> None:
    scenario = parse(_doc(nemesis={"partition": {"rate": 0.1}}))
    assert scenario.generated and scenario.steps == ()
    assert scenario.generate is not None
    assert scenario.generate["stagger"] == (0.0, 0.5)
    assert scenario.generate["clients"]["alice"]["mix"]["FILE_WRITE"] == 1
    assert scenario.nemesis == {
        "partition": {"rate": 0.1, "direction": "both", "duration": (0.5, 3.0)}
    }


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (_doc(generate={"duration": 5, "clients": {"alice": {"rate": 1}}, "typo": 1}), "typo"),
        (_doc(generate={"duration": 5, "clients": {"bob": {"rate": 1}}}), "bob"),
        (_doc(generate={"duration": 5, "clients": {"alice": {"rate": 0}}}), "rate"),
        (
            _doc(generate={"duration": 5, "clients": {"alice": {"rate": 1, "mix": {"PING": 1}}}}),
            "PING",
        ),
        (_doc(nemesis={"earthquake": {"rate": 1}}), "earthquake"),
        (_doc(nemesis={"pause": {"rate": 1, "duration": [3, 1]}}), "duration"),
        (_doc(nemesis={"pause": {"rate": 1, "agents": ["zed"]}}), "zed"),
        (_doc(nemesis={"delay": {"rate": 1}}), "delay_ms"),
        (_doc(nemesis={"hub_restart": {"rate": 1, "agents": ["a1"]}}), "agents"),
        (_doc(steps=[{"start": "hub"}]), "exactly one"),
        ({"name": "x", "topology": TOPOLOGY, "nemesis": {"kill": {"rate": 1}}}, "steps"),
    ],
)
def test_mistakes_are_refused_at_load(document: dict[str, Any], words: str) -> None:
    with pytest.raises(ScenarioError, match=words):
        parse(document, Path("gen.yaml"))


def test_a_takeover_needs_the_agents_it_starts() -> None:
    lonely = dict(TOPOLOGY, agents={"a1": {"machine": "a", "session": "s"}})
    for kind in ("takeover_same_machine", "takeover_other_machine"):
        with pytest.raises(ScenarioError, match="needs"):
            parse(_doc(topology=lonely, nemesis={kind: {"rate": 1}}))


@pytest.mark.parametrize("backend", ["sim", "process"])
def test_a_fault_the_backend_cannot_do_is_refused_at_load(backend: str) -> None:
    document = _doc(nemesis={"loss": {"rate": 1, "percent": 5}})
    with pytest.raises(ScenarioError, match=f"not supported on the {backend} backend"):
        parse(document, None, backend)
    assert parse(document, None, "docker").nemesis is not None


def test_every_nemesis_kind_but_loss_loads_on_every_backend() -> None:
    """The table: its own kinds, and every WebSocket fault of simulator/faults.py."""
    assert {
        "partition",
        "pause",
        "kill",
        "hub_restart",
        "takeover_same_machine",
        "takeover_other_machine",
        "revoke",
        "drop",
        "duplicate",
        "reorder",
        "delay",
    } <= set(NEMESIS_KINDS)
    assert not {"http_drop", "http_replay"} & set(NEMESIS_KINDS)
    for backend in ("sim", "process", "docker"):
        for kind in NEMESIS_KINDS:
            spec: dict[str, Any] = {"rate": 1}
            if kind == "loss" and backend != "docker":
                continue
            spec.update(_required(kind))
            parse(_doc(nemesis={kind: spec}), None, backend)


def _required(kind: str) -> dict[str, Any]:
    return {
        "latency": {"latency_ms": 10},
        "bandwidth": {"rate_kbps": 10},
        "limit_data": {"bytes": 1000},
        "delay": {"delay_ms": 10},
        "inject_close": {"code": 4000},
        "loss": {"percent": 5},
    }.get(kind, {})
