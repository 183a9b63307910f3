"""The agent's config file: `${DSH_COMPUTERS_HOME:-~/.dsh-computers}/config.json` (§6).

`{version, serverUrl, computerId, token, name, enrolledAt}`, written
atomically (temp file + rename) with mode 0600, since it holds the token.
The same shape serves the hub's runtime state (§10.2), which adds
`enabled`, `lastConnectedAt` and `lastError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.credentials import is_computer_id, is_credential


class ConfigError(ValueError):
    """The config file is missing, unreadable or not the agent's."""


def agent_home() -> Path:
    override = os.environ.get(C.AGENT_HOME_ENV)
    return Path(override) if override else Path.home() / C.AGENT_HOME_DIR


def config_path(home: Path | None = None) -> Path:
    return (home or agent_home()) / C.AGENT_CONFIG_FILE


def write_private_json(path: Path, value: dict[str, Any]) -> None:
    """Atomically replace `path` with `value`, readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def load(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist: run `enroll` first") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} is not a config object")
    for name, check in (
        ("serverUrl", lambda v: isinstance(v, str) and v.startswith(("http://", "https://"))),
        ("computerId", is_computer_id),
        ("token", is_credential),
    ):
        if not check(value.get(name)):
            raise ConfigError(f"{path}: `{name}` is missing or malformed")
    return value


def redacted(value: dict[str, Any]) -> dict[str, Any]:
    """§6 "Never print the token"."""
    shown = dict(value)
    if isinstance(shown.get("token"), str):
        shown["token"] = shown["token"][:9] + "…(redacted)"
    return shown
