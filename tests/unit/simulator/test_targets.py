"""Targets: command templates, hubs, tokens, adapters — and their typed errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tetherbed.simulator.targets import (
    AgentTarget,
    HubTarget,
    Target,
    TargetError,
    Tokens,
    client_adapter,
)
from tetherbed.simulator.targets.adapters import DEFAULT_CLIENT, load_class
from tetherbed.simulator.targets.hub import HubAccess

VALUES = {
    "hub_url": "ws://127.0.0.1:9",
    "token": "T",
    "session": "s1",
    "root": "/r",
    "machine": "m1",
    "name": "laptop",
    "state": "/st",
    "shell": True,
    "max_concurrent": 2,
    "protocol_version": "1.1",
}


def test_an_agent_template_is_filled_and_an_empty_flag_leaves_nothing() -> None:
    agent = AgentTarget.from_command(
        "shim --url {hub_url} --session {session} {shell_flag} -j {max_concurrent} '{{literal}}'"
    )
    assert agent.argv(VALUES) == [
        "shim", "--url", "ws://127.0.0.1:9", "--session", "s1", "--enable-shell", "-j", "2",
        "{literal}",
    ]  # fmt: skip
    assert "--enable-shell" not in agent.argv({**VALUES, "shell": False})
    assert agent.environment(VALUES)["TETHERBED_AGENT_TOKEN"] == "T"
    assert not agent.is_reference and AgentTarget.reference().is_reference


def test_agent_mapping_with_its_own_shell_flag_and_environment() -> None:
    agent = AgentTarget.from_mapping(
        {"command": ["shim", "{shell_flag}"], "env": {"ROOT": "{root}"}, "shell_flag": "--shell"},
        "t.agent",
    )
    assert agent.argv(VALUES) == ["shim", "--shell"]
    assert agent.environment(VALUES)["ROOT"] == "/r"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("shim {hub}", "unknown placeholder"),
        ("shim {hub_url!r}", "not a plain placeholder"),
        ("", "empty"),
        ("shim 'open", "cannot split"),
        (42, "a string or a list"),
    ],
)
def test_bad_agent_commands_are_refused_with_the_reason(raw: object, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        AgentTarget.from_command(raw)


def test_a_hub_by_url_needs_tokens_and_a_websocket_scheme(tmp_path: Path) -> None:
    tokens = {"alice": {"agent": "a1", "client": "c1"}}
    hub = HubTarget.from_mapping({"url": "wss://hub:8443/", "tokens": tokens}, tmp_path, "t.hub")
    assert not hub.startable and not hub.is_reference
    assert hub.load_tokens({}).get("alice", "client") == "c1"
    with pytest.raises(TargetError, match="needs `tokens`"):
        HubTarget.from_mapping({"url": "ws://hub"}, tmp_path, "t.hub")
    with pytest.raises(TargetError, match="ws:// or wss://"):
        HubTarget.from_mapping({"url": "http://hub", "tokens": tokens}, tmp_path, "t.hub")
    with pytest.raises(TargetError, match="needs its `url`"):
        HubTarget.from_mapping({"command": "my-hub", "tokens": tokens}, tmp_path, "t.hub")


def test_a_hub_command_is_a_template_with_a_tokens_file(tmp_path: Path) -> None:
    raw = {
        "command": ["my-hub", "--port", "{port}", "--data", "{state}", "--opts", "{options}"],
        "url": "ws://{host}:{port}",
        "tokens": "{state}/tokens.json",
    }
    hub = HubTarget.from_mapping(raw, tmp_path, "t.hub")
    values = {**hub.values(port=5000, state=tmp_path, users=["alice"]), "options": "{}"}
    assert hub.argv(values) == ["my-hub", "--port", "5000", "--data", str(tmp_path), "--opts", "{}"]
    assert hub.resolved_url(values) == "ws://127.0.0.1:5000"
    (tmp_path / "tokens.json").write_text(json.dumps({"alice": {"agent": "A", "client": "C"}}))
    assert hub.load_tokens(values).get("alice", "agent") == "A"
    with pytest.raises(TargetError, match="no client token for user 'bob'"):
        hub.load_tokens(values).get("bob", "client")


def test_bad_tokens_are_named() -> None:
    with pytest.raises(TargetError, match=r"alice\.admin"):
        Tokens.parse({"alice": {"admin": "x"}}, "tokens")
    with pytest.raises(TargetError, match="cannot read"):
        Tokens.read(Path("/nonexistent/tokens.yaml"))


def test_a_target_file_with_overrides(tmp_path: Path) -> None:
    (tmp_path / "tokens.yaml").write_text("alice: {agent: A, client: C}\n")
    path = tmp_path / "target.yaml"
    path.write_text(
        "agent: {command: 'shim --url {hub_url}'}\n"
        "hub: {url: 'ws://hub:1', tokens: tokens.yaml}\n"
        "client_adapter: my.module:Clients\n"
    )
    target = Target.read(path)
    assert target.hub.load_tokens({}).get("alice", "agent") == "A"
    assert "agent `shim`" in target.describe() and "my.module:Clients" in target.describe()
    other = target.with_options(agent_command="other {token}", hub_url="ws://elsewhere:2")
    assert other.agent.command == ("other", "{token}") and other.hub.url == "ws://elsewhere:2"
    assert other.hub.load_tokens({}).get("alice", "client") == "C"
    with pytest.raises(TargetError, match="unknown key"):
        Target.from_mapping({"agents": {}}, tmp_path)
    with pytest.raises(TargetError, match="MODULE:CLASS"):
        Target.from_mapping({"client_adapter": "no-colon"}, tmp_path)


def test_adapters_are_imported_and_checked() -> None:
    access = HubAccess("ws://127.0.0.1:1", Tokens({("alice", "client"): "C"}))
    assert type(client_adapter(DEFAULT_CLIENT, access)).__name__ == "TetherbedClients"
    with pytest.raises(TargetError, match="cannot import"):
        load_class("no_such_module_here:X", "client adapter")
    with pytest.raises(TargetError, match="has no class"):
        load_class("tetherbed.simulator.targets:Nothing", "client adapter")
    with pytest.raises(TargetError, match="needs async open"):
        client_adapter("tetherbed.simulator.targets.hub:Tokens", access)


def tetherbed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tetherbed", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_line_refuses_a_bad_target_before_running(tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parents[3] / "scenarios" / "version_mismatch.yaml"
    bad = tetherbed(str(scenario), "--backend", "process", "--agent-command", "shim {nope}")
    assert bad.returncode == 2 and "unknown placeholder" in bad.stderr
    sim = tetherbed(str(scenario), "--agent-command", "shim {hub_url}", "--report", str(tmp_path))
    assert sim.returncode == 2 and "sim backend runs only Tetherbed's own parts" in sim.stderr
