"""The hub's tunable options: one table, the same name on the command line and in scenarios."""

from __future__ import annotations

from tetherbed.cli import build_parser
from tetherbed.hub.config import TUNABLE_OPTIONS, HubConfig, option_flag
from tetherbed.simulator.backends.process import hub_arguments
from tetherbed.simulator.backends.sim import hub_config
from tetherbed.simulator.scenario.schema import HUB_OPTIONS

#: A value each option accepts, different from its default.
VALUES = {name: 7 for name in TUNABLE_OPTIONS}


def test_every_tunable_option_is_a_scenario_hub_option_and_a_hub_flag() -> None:
    assert set(TUNABLE_OPTIONS) <= set(HUB_OPTIONS.fields)
    hub_parser = build_parser()._subparsers._group_actions[0].choices["hub"]  # type: ignore[union-attr]
    flags = {flag for action in hub_parser._actions for flag in action.option_strings}
    assert {option_flag(name) for name in TUNABLE_OPTIONS} <= flags


def test_sim_and_process_hubs_get_the_same_settings() -> None:
    config = hub_config(VALUES)
    for name, attribute in TUNABLE_OPTIONS.items():
        assert getattr(config, attribute) == 7 != getattr(HubConfig(), attribute), name
    args = hub_arguments(VALUES)
    for name in TUNABLE_OPTIONS:
        at = args.index(option_flag(name))
        assert args[at + 1] == "7"
