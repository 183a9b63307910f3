"""The third parties of Tetherbed's own test suite, as targets.

`MINIMAL_AGENT` is the independent agent through `--agent-command`;
`TETHERBED_AGENT` is Tetherbed's own agent the same way (no journal, judged
from the wire like any other), in its strict profile (`--strict-wire`: it
drops, unanswered, any frame the public reference shim would, so a scenario
that sent a field the spec does not name would hang); `standin_hub()` is the
stand-in hub with its adapters.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from tetherbed.simulator.targets import Target

HERE = Path(__file__).resolve().parent
PYTHON = shlex.quote(sys.executable)

MINIMAL_AGENT = (
    f"{PYTHON} {shlex.quote(str(HERE / 'minimal_agent.py'))} --url {{hub_url}} "
    "--token {token} --session {session} --root {root} --machine {machine} {shell_flag} "
    "--max-concurrent {max_concurrent} --protocol-version {protocol_version}"
)
TETHERBED_AGENT = (
    f"{PYTHON} -m tetherbed agent --strict-wire --hub {{hub_url}} --token {{token}} "
    "--session-id {session} "
    "--root {root} --machine-id {machine} --state-dir {state} {shell_flag} "
    "--max-concurrent {max_concurrent} --protocol-version {protocol_version}"
)


def standin_hub(*extra: str, agent: str | None = None, tls: dict[str, Any] | None = None) -> Target:
    """The stand-in hub as a target (`extra`: more stand-in flags)."""
    return Target.from_mapping(standin_mapping(*extra, agent=agent, tls=tls), HERE, "stand-in")


def standin_mapping(
    *extra: str, agent: str | None = None, tls: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The stand-in hub as a target file holds it (YAML-ready)."""
    scheme = "wss" if tls else "ws"
    raw: dict[str, Any] = {
        "hub": {
            "command": [
                sys.executable,
                str(HERE / "standin_hub.py"),
                "--port",
                "{port}",
                "--state",
                "{state}",
                "--users",
                "{users}",
                "--options",
                "{options}",
                *extra,
            ],
            "url": scheme + "://{host}:{port}",
            "tokens": "{state}/tokens.yaml",
            "ready": "/healthz",
        },
        "client_adapter": "tests.third_party.standin_adapters:StandinClients",
        "admin_adapter": "tests.third_party.standin_adapters:StandinAdmin",
    }
    if agent is not None:
        raw["agent"] = {"command": agent}
    if tls:
        raw["tls"] = tls
    return raw
