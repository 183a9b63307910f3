"""`--tetherbed-plan`: how the plan reaches Locust's master and, through it, every worker."""

from __future__ import annotations

from typing import Any

from locust.env import Environment

from tetherbed.load.plan import Plan

OPTION = "--tetherbed-plan"
_decoded: dict[str, Plan] = {}


def add_option(parser: Any) -> None:
    """On `init_command_line_parser`: the option, kept out of Locust's web UI."""
    parser.add_argument(
        OPTION,
        default="",
        include_in_web_ui=False,
        help="the load run's plan, as JSON (written by `tetherbed load`)",
    )


def plan_of(environment: Environment) -> Plan:
    """The plan this process was given (on workers: once the master sent it)."""
    options = environment.parsed_options
    text = getattr(options, "tetherbed_plan", "") if options is not None else ""
    if not text:
        raise RuntimeError(
            f"no {OPTION}: run this locustfile through `tetherbed load`, which writes the plan"
        )
    plan = _decoded.get(text)
    if plan is None:
        plan = _decoded[text] = Plan.decode(text)
    return plan
