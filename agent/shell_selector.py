"""Which program runs an EXECUTE_COMMAND `command`, per the spec's selector table.

This is the macOS/Linux column of the table. The Windows column (auto → cmd.exe,
powershell → powershell.exe, ...) is not implemented: the agent runs on POSIX
hosts only, so there `powershell` and `cmd` are simply not available.

Shells are looked up on the agent's own PATH and returned as absolute paths, so
the program that runs is the one that was found, whatever PATH the wire `env`
gives the child.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError

Which = Callable[[str], str | None]

#: Arguments that make each shell run one command string and exit.
COMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "bash": ("-c",),
    "sh": ("-c",),
    "zsh": ("-c",),
    "pwsh": ("-NoProfile", "-NonInteractive", "-Command"),
}

#: Selector values that name a Windows-only shell.
WINDOWS_ONLY = frozenset({"powershell", "cmd"})

#: `auto` on POSIX: bash if on PATH, else sh.
AUTO_PREFERENCE = ("bash", "sh")


def shell_argv(shell: str, command: str, *, which: Which = shutil.which) -> list[str]:
    """The argv that runs `command` under the shell selected by `shell`.

    Raises ProtocolError(SHELL_NOT_AVAILABLE) when the selected shell is not
    installed or does not exist on this OS, and INVALID_MESSAGE for a selector
    value the spec does not list.
    """
    if shell == "auto":
        for name in AUTO_PREFERENCE:
            path = which(name)
            if path:
                return [path, *COMMAND_FLAGS[name], command]
        raise ProtocolError(
            ErrorCode.SHELL_NOT_AVAILABLE, "shell 'auto' found neither bash nor sh on PATH"
        )
    if shell in WINDOWS_ONLY:
        raise ProtocolError(
            ErrorCode.SHELL_NOT_AVAILABLE, f"shell {shell!r} is available on Windows only"
        )
    if shell not in COMMAND_FLAGS:
        raise ProtocolError(ExtensionCode.INVALID_MESSAGE, f"unknown shell selector {shell!r}")
    path = which(shell)
    if not path:
        raise ProtocolError(ErrorCode.SHELL_NOT_AVAILABLE, f"shell {shell!r} is not installed")
    return [path, *COMMAND_FLAGS[shell], command]
