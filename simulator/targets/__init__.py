"""Targets: what a run is pointed at — the agent, the hub, their adapters, TLS.

Tetherbed's users bring their own agent or hub. A `Target` says how to run
or reach each part: an agent command template, a hub URL or the command that
starts it (with its tokens from a file), the client and admin adapters
(`MODULE:CLASS`, see `adapters.py`) and TLS for `wss://`. Tetherbed's own
parts are the default, one target among others. Every command that runs
against a system under test reads its target through `Target.read` and
`Target.with_options`; the format is in docs/targets.md.
"""

from tetherbed.simulator.targets.adapters import (
    AdminAdapter,
    Answer,
    ClientAdapter,
    ConnectionLost,
    NotSupported,
    OpenRefused,
    SessionClient,
    admin_adapter,
    client_adapter,
)
from tetherbed.simulator.targets.agent import AgentTarget
from tetherbed.simulator.targets.errors import TargetError
from tetherbed.simulator.targets.hub import HubAccess, HubTarget, Tokens
from tetherbed.simulator.targets.target import Target
from tetherbed.simulator.targets.tls import TlsOptions

__all__ = [
    "AdminAdapter",
    "AgentTarget",
    "Answer",
    "ClientAdapter",
    "ConnectionLost",
    "HubAccess",
    "HubTarget",
    "NotSupported",
    "OpenRefused",
    "SessionClient",
    "Target",
    "TargetError",
    "TlsOptions",
    "Tokens",
    "admin_adapter",
    "client_adapter",
]
