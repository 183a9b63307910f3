"""The child's environment: a small baseline from the agent, plus the wire `env`."""

from __future__ import annotations

import pytest

from tetherbed.agent.environment import DEFAULT_PATH, safe_environment
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError

AGENT_ENV = {
    "HOME": "/home/alice",
    "PATH": "/opt/bin:/usr/bin",
    "LANG": "en_US.UTF-8",
    "TZ": "Europe/Paris",
    "TMPDIR": "/var/tmp",
    "USER": "alice",
    "SHELL": "/bin/zsh",
    "LC_ALL": "C.UTF-8",
    "LC_CTYPE": "C.UTF-8",
    "TETHERBED_TOKEN": "tok-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "GITHUB_TOKEN": "gh-secret",
    "SSH_AUTH_SOCK": "/tmp/agent.sock",
    "LD_PRELOAD": "/tmp/evil.so",
    "PWD": "/home/alice/work",
}


def test_baseline_keeps_only_the_listed_variables() -> None:
    env = safe_environment(AGENT_ENV, None)
    assert env == {
        "HOME": "/home/alice",
        "PATH": "/opt/bin:/usr/bin",
        "LANG": "en_US.UTF-8",
        "TZ": "Europe/Paris",
        "TMPDIR": "/var/tmp",
        "USER": "alice",
        "SHELL": "/bin/zsh",
        "LC_ALL": "C.UTF-8",
        "LC_CTYPE": "C.UTF-8",
    }


def test_secrets_never_reach_the_child_even_with_a_wire_env() -> None:
    env = safe_environment(AGENT_ENV, {"MY_VAR": "value"})
    leaked = {"tok-secret", "aws-secret", "gh-secret"} & set(env.values())
    assert not leaked
    assert "TETHERBED_TOKEN" not in env
    assert env["MY_VAR"] == "value"


@pytest.mark.parametrize("agent_env", [{}, {"PATH": ""}, {"HOME": "/root"}])
def test_missing_or_empty_path_gets_a_sane_default(agent_env: dict[str, str]) -> None:
    assert safe_environment(agent_env, None)["PATH"] == DEFAULT_PATH


def test_wire_env_is_merged_on_top_of_the_baseline() -> None:
    env = safe_environment(AGENT_ENV, {"PATH": "/wire/bin", "LC_ALL": "fr_FR.UTF-8", "X": ""})
    assert env["PATH"] == "/wire/bin"
    assert env["LC_ALL"] == "fr_FR.UTF-8"
    assert env["X"] == ""
    assert env["HOME"] == "/home/alice"


def test_inputs_are_not_modified_and_the_result_is_a_fresh_dict() -> None:
    agent_env = dict(AGENT_ENV)
    wire_env = {"A": "1"}
    env = safe_environment(agent_env, wire_env)
    env["HOME"] = "changed"
    assert agent_env == AGENT_ENV
    assert wire_env == {"A": "1"}


def test_unusable_agent_variables_are_dropped_not_raised() -> None:
    env = safe_environment({"LC_BAD": "a\0b", "HOME": "/h"}, None)
    assert env == {"HOME": "/h", "PATH": DEFAULT_PATH}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("", "x"),
        ("A=B", "x"),
        ("A\0B", "x"),
        ("GOOD", "bad\0value"),
    ],
)
def test_invalid_wire_variables_are_rejected(name: str, value: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        safe_environment(AGENT_ENV, {name: value})
    assert caught.value.code == ExtensionCode.INVALID_MESSAGE
