"""The environment a command runs with: a small safe baseline plus the wire `env`.

The agent's own environment holds its hub token and whatever credentials the
user's login shell exported (AWS_*, GITHUB_TOKEN, ...). A remote command must not
see them, so the child never inherits the agent's environment: it gets only the
variables a program needs to behave like a normal POSIX process, and the
platform adds what it wants through EXECUTE_COMMAND.env.
"""

from __future__ import annotations

from collections.abc import Mapping

from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError

#: Variables copied from the agent's environment, when set.
BASELINE_NAMES = frozenset({"HOME", "PATH", "LANG", "TZ", "TMPDIR", "USER", "SHELL"})

#: Locale variables (LC_ALL, LC_CTYPE, ...) are copied too.
LOCALE_PREFIX = "LC_"

#: PATH for a child when the agent itself has none (e.g. started by a bare init).
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def safe_environment(
    agent_env: Mapping[str, str], wire_env: Mapping[str, str] | None
) -> dict[str, str]:
    """The child's environment: the baseline of `agent_env`, then `wire_env` on top.

    Raises ProtocolError(INVALID_MESSAGE) for a wire variable that exec could not
    pass on or that would be read back as a different name: an empty name, a
    name with '=' or NUL, a value with NUL.
    """
    env = {
        name: value
        for name, value in agent_env.items()
        if _is_baseline(name) and _is_valid_name(name) and "\0" not in value
    }
    if not env.get("PATH"):
        env["PATH"] = DEFAULT_PATH
    for name, value in (wire_env or {}).items():
        _check_wire_variable(name, value)
        env[name] = value
    return env


def _is_baseline(name: str) -> bool:
    return name in BASELINE_NAMES or name.startswith(LOCALE_PREFIX)


def _is_valid_name(name: object) -> bool:
    return isinstance(name, str) and bool(name) and "=" not in name and "\0" not in name


def _check_wire_variable(name: object, value: object) -> None:
    if not _is_valid_name(name):
        raise ProtocolError(
            ExtensionCode.INVALID_MESSAGE,
            f"env name {name!r} is invalid: it must be a non-empty string without '=' or NUL",
        )
    if not isinstance(value, str) or "\0" in value:
        raise ProtocolError(
            ExtensionCode.INVALID_MESSAGE,
            f"env value of {name} is invalid: it must be a string without NUL",
        )
