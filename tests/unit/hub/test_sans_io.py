"""The hub's core stays sans-I/O, and agent links move only through one table.

Checked on the source, so that a later change cannot quietly bring a database
call, a socket or a clock read into the core, or assign a link's state
outside `hub/agent_states.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tetherbed.hub.agent_states import (
    TRANSITIONS,
    AgentEvent,
    AgentState,
    IllegalTransition,
    advance,
)

HUB = Path(__file__).resolve().parents[3] / "hub"
#: The protocol-rule modules: plain classes and functions, no I/O.
SANS_IO = [
    "core.py",
    "agent_states.py",
    "request_policy.py",
    "links.py",
    "ownership.py",
    "retry.py",
    "handshake.py",
    "timers.py",
    "actions.py",
]
FORBIDDEN = {
    "asyncio",
    "socket",
    "sqlite3",
    "time",
    "aiohttp",
    "websockets",
    "tetherbed.hub.store",
    "tetherbed.hub.server",
    "tetherbed.runtime.event_log",
}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", SANS_IO)
def test_protocol_rules_import_no_io(module: str) -> None:
    assert not imported(HUB / module) & FORBIDDEN


def test_the_core_takes_no_callbacks_into_the_store_or_the_journal() -> None:
    tree = ast.parse((HUB / "core.py").read_text())
    (init,) = [
        node
        for cls in tree.body
        if isinstance(cls, ast.ClassDef) and cls.name == "HubCore"
        for node in cls.body
        if isinstance(node, ast.FunctionDef) and node.name == "__init__"
    ]
    params = [a.arg for a in (*init.args.args, *init.args.kwonlyargs)]
    assert params == ["self", "config", "clock"]


def test_no_link_state_is_assigned_outside_the_transition_table() -> None:
    for module in SANS_IO:
        if module == "agent_states.py":
            continue
        for node in ast.walk(ast.parse((HUB / module).read_text())):
            if isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    assert not (isinstance(target, ast.Attribute) and target.attr == "state"), (
                        f"{module}:{node.lineno} assigns a state directly"
                    )


class Link:
    def __init__(self, state: AgentState) -> None:
        self.state = state


def test_every_state_says_where_each_event_leads_and_nothing_else_is_allowed() -> None:
    for state in AgentState:
        for event in AgentEvent:
            link = Link(state)
            if event in TRANSITIONS[state]:
                assert advance(link, event) is TRANSITIONS[state][event]
            else:
                with pytest.raises(IllegalTransition):
                    advance(link, event)
                assert link.state is state


def test_closed_is_final_and_reachable_from_every_open_state() -> None:
    assert TRANSITIONS[AgentState.CLOSED] == {}
    for state in (AgentState.AWAITING_HELLO, AgentState.READY, AgentState.DETACHED):
        assert TRANSITIONS[state][AgentEvent.SOCKET_CLOSED] is AgentState.CLOSED
