"""The agent under test: Tetherbed's own, or any command that dials a hub.

A third-party agent is a command template. Tetherbed fills in, for each agent
of a scenario:

| placeholder | value |
|---|---|
| `{hub_url}` | where to dial: the recorder in front of the hub (`ws://` or `wss://`) |
| `{token}` | the agent bearer token of the agent's user |
| `{session}` | the session it serves (its data connection's path) |
| `{root}` | the machine's folder (the allowed root) |
| `{machine}` | its machine id |
| `{name}` | the scenario's name for the agent |
| `{state}` | a private folder for its own state (created empty) |
| `{shell_flag}` | `shell_flag` (default `--enable-shell`) if the shell is on, else nothing |
| `{max_concurrent}` | the scenario's `max_concurrent` (default 4) |
| `{protocol_version}` | the protocol version it should claim (default `1.1`) |
| `{ollama_url}` | the agent's local LLM server (`options.llm`), else empty |
| `{serial_ports}` | its virtual serial ports (`options.serial`): `PATH=DESC,...`, else empty |
| `{usb_devices}` | a USB device to advertise, `VID:PID=DESC` (conformance cases), else empty |
| `{gpio_lines}` | a GPIO line to advertise, `CHIP:LINE=DESC` (conformance cases), else empty |
| `{recycle_bin}` | the folder its recycle-bin delete mode uses (conformance cases), else empty |

The same placeholders work in `env`. The token is also always in the
environment as `TETHERBED_AGENT_TOKEN`. Tetherbed's own agent is the default
(`AgentTarget.reference()`); through `--agent-command` it is a third party
like any other: no journal, judged from the wire only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tetherbed.simulator.targets.errors import TargetError
from tetherbed.simulator.targets.templates import (
    check_placeholders,
    fill,
    fill_one,
    parse_command,
)
from tetherbed.wire.version import CURRENT_TEXT

PLACEHOLDERS = (
    "hub_url",
    "token",
    "session",
    "root",
    "machine",
    "name",
    "state",
    "shell_flag",
    "max_concurrent",
    "protocol_version",
    "ollama_url",
    "serial_ports",
    "usb_devices",
    "gpio_lines",
    "recycle_bin",
)
DEFAULT_SHELL_FLAG = "--enable-shell"


@dataclass(frozen=True, slots=True)
class AgentTarget:
    #: None: Tetherbed's own agent, with its journal.
    command: tuple[str, ...] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    shell_flag: str = DEFAULT_SHELL_FLAG

    @classmethod
    def reference(cls) -> AgentTarget:
        return cls()

    @property
    def is_reference(self) -> bool:
        return self.command is None

    @classmethod
    def from_command(cls, raw: object, where: str = "--agent-command") -> AgentTarget:
        command = parse_command(raw, where)
        check_placeholders(command, PLACEHOLDERS, where)
        return cls(command=command)

    @classmethod
    def from_mapping(cls, raw: Any, where: str) -> AgentTarget:
        if raw is None:
            return cls.reference()
        if isinstance(raw, str | list):
            return cls.from_command(raw, f"{where}.command")
        if not isinstance(raw, dict):
            raise TargetError(f"{where}: agent is a command or a mapping with `command`")
        unknown = set(raw) - {"command", "env", "shell_flag"}
        if unknown:
            raise TargetError(f"{where}: unknown agent key(s) {sorted(unknown)}")
        if raw.get("command") is None:
            return cls.reference()
        command = parse_command(raw["command"], f"{where}.command")
        check_placeholders(command, PLACEHOLDERS, f"{where}.command")
        env = raw.get("env") or {}
        if not isinstance(env, dict):
            raise TargetError(f"{where}.env: a mapping of variable → value")
        env = {str(k): str(v) for k, v in env.items()}
        check_placeholders(env.values(), PLACEHOLDERS, f"{where}.env")
        shell_flag = raw.get("shell_flag", DEFAULT_SHELL_FLAG)
        if not isinstance(shell_flag, str):
            raise TargetError(f"{where}.shell_flag: text")
        return cls(command=command, env=env, shell_flag=shell_flag)

    def argv(self, values: Mapping[str, object]) -> list[str]:
        """The command for one agent (`values` as the table above names them)."""
        if self.command is None:
            raise TargetError("the reference agent is started by the backend, not by a template")
        return fill(self.command, self._values(values))

    def environment(self, values: Mapping[str, object]) -> dict[str, str]:
        filled = self._values(values)
        env = {name: fill_one(value, filled) for name, value in self.env.items()}
        env["TETHERBED_AGENT_TOKEN"] = str(values.get("token", ""))
        return env

    def _values(self, values: Mapping[str, object]) -> dict[str, object]:
        filled = dict(values)
        filled["shell_flag"] = self.shell_flag if values.get("shell") else ""
        filled.setdefault("max_concurrent", 4)
        filled.setdefault("protocol_version", CURRENT_TEXT)
        return {name: filled.get(name, "") for name in PLACEHOLDERS}
