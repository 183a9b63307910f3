"""A target: the agent, the hub, the adapters and TLS, as one value.

Read from a target file (`--target FILE`, YAML) and overridden field by
field from the command line (`--agent-command`, `--hub-url`, ...); every
command that runs something against a system under test (`run` today,
`conform`, `explore`, `fuzz` and `load` later) takes one. docs/targets.md
describes the format:

    agent:
      command: ["my-shim", "--url", "{hub_url}", "--token", "{token}",
                "--session", "{session}", "--root", "{root}", "{shell_flag}"]
    hub:
      command: ["my-hub", "--port", "{port}", "--data", "{state}"]
      url: "ws://{host}:{port}"
      tokens: "{state}/tokens.yaml"
      ready: /healthz
    client_adapter: my_package.testing:Clients
    admin_adapter: my_package.testing:Admin
    tls: {ca: ca.pem}
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from tetherbed.simulator.targets.adapters import DEFAULT_ADMIN, DEFAULT_CLIENT, check_reference
from tetherbed.simulator.targets.agent import AgentTarget
from tetherbed.simulator.targets.errors import TargetError
from tetherbed.simulator.targets.hub import HubTarget, Tokens
from tetherbed.simulator.targets.tls import TlsOptions

KEYS = ("agent", "hub", "client_adapter", "admin_adapter", "tls")


@dataclass(frozen=True, slots=True)
class Target:
    agent: AgentTarget = field(default_factory=AgentTarget.reference)
    hub: HubTarget = field(default_factory=HubTarget.reference)
    client_adapter: str = DEFAULT_CLIENT
    admin_adapter: str = DEFAULT_ADMIN
    tls: TlsOptions = field(default_factory=TlsOptions)

    @classmethod
    def reference(cls) -> Target:
        """Tetherbed's own hub and agent, through its own API."""
        return cls()

    @property
    def is_reference(self) -> bool:
        return self.agent.is_reference and self.hub.is_reference

    @classmethod
    def from_mapping(cls, raw: Any, base: Path = Path(), where: str = "target") -> Target:
        if raw is None:
            return cls.reference()
        if not isinstance(raw, dict):
            raise TargetError(f"{where}: a target is a mapping of {', '.join(KEYS)}")
        unknown = set(raw) - set(KEYS)
        if unknown:
            raise TargetError(f"{where}: unknown key(s) {sorted(unknown)} (allowed: {KEYS})")
        hub = HubTarget.from_mapping(raw.get("hub"), base, f"{where}.hub")
        target = cls(
            agent=AgentTarget.from_mapping(raw.get("agent"), f"{where}.agent"),
            hub=hub,
            client_adapter=check_reference(
                str(raw.get("client_adapter", DEFAULT_CLIENT)), f"{where}.client_adapter"
            ),
            admin_adapter=check_reference(
                str(raw.get("admin_adapter", DEFAULT_ADMIN)), f"{where}.admin_adapter"
            ),
            tls=TlsOptions.from_mapping(raw.get("tls"), base, f"{where}.tls"),
        )
        return target

    @classmethod
    def read(cls, path: Path) -> Target:
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise TargetError(f"cannot read target {path}: {exc}") from None
        except yaml.YAMLError as exc:
            raise TargetError(f"{path}: not valid YAML: {exc}") from None
        return cls.from_mapping(raw, path.parent, str(path))

    def with_options(
        self,
        *,
        agent_command: str | list[str] | None = None,
        hub_url: str | None = None,
        hub_command: str | None = None,
        hub_tokens: Path | None = None,
        client_adapter: str | None = None,
        admin_adapter: str | None = None,
        hub_ca: Path | None = None,
        insecure: bool = False,
        recorder_cert: Path | None = None,
        recorder_key: Path | None = None,
    ) -> Target:
        """This target with command-line overrides applied."""
        target = self
        if agent_command is not None:
            target = replace(target, agent=AgentTarget.from_command(agent_command))
        if hub_url is not None or hub_command is not None or hub_tokens is not None:
            raw: dict[str, Any] = {}
            current = target.hub
            url = hub_url or current.url
            if url is not None:
                raw["url"] = url
            if hub_command is not None:
                raw["command"] = hub_command
            elif current.command is not None and hub_url is None:
                raw["command"] = list(current.command)
            if hub_tokens is not None:
                raw["tokens"] = str(hub_tokens.resolve())
            elif current.tokens_file is not None:
                raw["tokens"] = current.tokens_file
            elif current.tokens is not None:
                raw["tokens"] = _tokens_mapping(current.tokens)
            target = replace(target, hub=HubTarget.from_mapping(raw, current.base, "--hub"))
        if client_adapter is not None:
            target = replace(
                target, client_adapter=check_reference(client_adapter, "--client-adapter")
            )
        if admin_adapter is not None:
            target = replace(
                target, admin_adapter=check_reference(admin_adapter, "--admin-adapter")
            )
        if hub_ca or insecure or recorder_cert or recorder_key:
            tls = {
                "ca": str(hub_ca) if hub_ca else (str(self.tls.ca) if self.tls.ca else None),
                "insecure": insecure or self.tls.insecure,
                "cert": str(recorder_cert or self.tls.cert)
                if (recorder_cert or self.tls.cert)
                else None,
                "key": str(recorder_key or self.tls.key)
                if (recorder_key or self.tls.key)
                else None,
            }
            target = replace(
                target,
                tls=TlsOptions.from_mapping(
                    {k: v for k, v in tls.items() if v is not None}, Path(), "--tls"
                ),
            )
        return target

    def describe(self) -> str:
        """One line for the terminal: what is under test."""
        agent = (
            "Tetherbed's agent" if self.agent.is_reference else f"agent `{self.agent.command[0]}`"
        )  # type: ignore[index]
        if self.hub.is_reference:
            hub = "Tetherbed's hub"
        elif self.hub.command is not None:
            hub = f"hub `{self.hub.command[0]}`"
        else:
            hub = f"hub at {self.hub.url}"
        adapters = ""
        if self.client_adapter != DEFAULT_CLIENT:
            adapters = f", clients via {self.client_adapter}"
        return f"{agent}, {hub}{adapters}"


def _tokens_mapping(tokens: Tokens) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for (user, kind), token in tokens.table.items():
        table.setdefault(user, {})[kind] = token
    return table
