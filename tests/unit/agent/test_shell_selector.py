"""The spec's shell selector table, macOS/Linux column, with an injected `which`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tetherbed.agent.shell_selector import shell_argv
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError

ALL_SHELLS = {
    "bash": "/usr/bin/bash",
    "sh": "/bin/sh",
    "zsh": "/usr/bin/zsh",
    "pwsh": "/usr/local/bin/pwsh",
    # Present on PATH, yet the POSIX column says these are never available.
    "powershell": "/opt/powershell",
    "cmd": "/opt/cmd",
}


def installed(*names: str) -> Callable[[str], str | None]:
    """A `which` that finds only `names`."""
    return lambda name: ALL_SHELLS[name] if name in names else None


@pytest.mark.parametrize(
    ("shell", "expected"),
    [
        ("auto", ["/usr/bin/bash", "-c", "echo hi"]),
        ("bash", ["/usr/bin/bash", "-c", "echo hi"]),
        ("sh", ["/bin/sh", "-c", "echo hi"]),
        ("zsh", ["/usr/bin/zsh", "-c", "echo hi"]),
        (
            "pwsh",
            ["/usr/local/bin/pwsh", "-NoProfile", "-NonInteractive", "-Command", "echo hi"],
        ),
    ],
)
def test_installed_shells_run_the_command_string(shell: str, expected: list[str]) -> None:
    assert shell_argv(shell, "echo hi", which=installed(*ALL_SHELLS)) == expected


def test_auto_falls_back_to_sh_without_bash() -> None:
    assert shell_argv("auto", "true", which=installed("sh", "zsh")) == ["/bin/sh", "-c", "true"]


def test_auto_without_bash_or_sh_is_not_available() -> None:
    with pytest.raises(ProtocolError) as caught:
        shell_argv("auto", "true", which=installed("zsh"))
    assert caught.value.code == ErrorCode.SHELL_NOT_AVAILABLE


@pytest.mark.parametrize("shell", ["bash", "sh", "zsh", "pwsh"])
def test_a_named_shell_that_is_not_installed_is_not_available(shell: str) -> None:
    others = [name for name in ALL_SHELLS if name != shell]
    with pytest.raises(ProtocolError) as caught:
        shell_argv(shell, "true", which=installed(*others))
    assert caught.value.code == ErrorCode.SHELL_NOT_AVAILABLE


@pytest.mark.parametrize("shell", ["powershell", "cmd"])
def test_windows_shells_are_not_available_on_posix(shell: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        shell_argv(shell, "dir", which=installed(*ALL_SHELLS))
    assert caught.value.code == ErrorCode.SHELL_NOT_AVAILABLE


def test_an_unknown_selector_is_an_invalid_message() -> None:
    with pytest.raises(ProtocolError) as caught:
        shell_argv("fish", "true", which=installed(*ALL_SHELLS))
    assert caught.value.code == ExtensionCode.INVALID_MESSAGE


def test_the_command_is_one_argument_and_never_split() -> None:
    command = "echo 'a b' \"$HOME\"; ls | wc -l"
    argv = shell_argv("sh", command, which=installed("sh"))
    assert argv[-1] == command
    assert len(argv) == 3


def test_the_real_which_finds_sh_on_this_host() -> None:
    argv = shell_argv("sh", "true")
    assert argv[0].endswith("/sh")
    assert argv[1:] == ["-c", "true"]
