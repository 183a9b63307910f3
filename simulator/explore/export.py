"""Writing a (shrunk) generated run as a plain step-list scenario file.

The file is an ordinary scenario — topology, seed, checkers and steps, no
`generate:` and no `nemesis:` — so `tetherbed run FILE` replays it on the
backend it was found on with the same verdict (on sim, the same history: the
seed is in the file), and it can be kept as a regression test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tetherbed.simulator.explore.plan import Plan


def exported_document(
    plan: Plan, *, found: str, original: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The plan as a scenario document; `found` says how it was found."""
    sizes = plan.size()
    before = original or sizes
    description = (
        f"{found}. Shrunk from {_sizes(before)} to {_sizes(sizes)}. "
        "Exported by tetherbed explore --export: a plain step list that replays it."
    )
    return plan.document(name=f"found: {plan.base['name']}", description=description)


def write_scenario(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    path.write_text(text, encoding="utf-8")


def _sizes(size: dict[str, Any]) -> str:
    return (
        f"{size['operations']} operations, {size['faults']} faults, {size['agents']} agents, "
        f"{size['seconds']:g} s"
    )
