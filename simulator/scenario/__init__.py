"""Scenario files: a topology, steps to run against it, and checkers to apply.

The format is documented in docs/scenarios.md and written down, key by key,
in `schema.py`. Loading validates everything up front — unknown keys at any
depth, wrong types, unknown checkers, fault kinds and states, references to
undeclared nodes, what the chosen backend cannot do — and reports the file,
the step and the key, so a typo never turns a fault off or fails halfway
through a run.
"""

from tetherbed.simulator.scenario.loader import (
    ScenarioError,
    check_agent_options,
    check_hub_options,
    check_step,
    check_topology,
    load,
    load_all,
    parse,
    scenario_files,
    shipped_scenarios,
)
from tetherbed.simulator.scenario.model import (
    AgentSpec,
    ClientSpec,
    HubSpec,
    Scenario,
    Step,
    Topology,
)
from tetherbed.simulator.scenario.schema import DEFAULT_CHECKERS, STEPS

STEP_KINDS = tuple(STEPS)

__all__ = [
    "DEFAULT_CHECKERS",
    "STEP_KINDS",
    "AgentSpec",
    "ClientSpec",
    "HubSpec",
    "Scenario",
    "ScenarioError",
    "Step",
    "Topology",
    "check_agent_options",
    "check_hub_options",
    "check_step",
    "check_topology",
    "load",
    "load_all",
    "parse",
    "scenario_files",
    "shipped_scenarios",
]
