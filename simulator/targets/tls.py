"""TLS for `wss://` targets: what the recorder trusts and what it presents.

The recorder sits between each agent and the hub. With a `wss://` hub it can
do one of two things:

- **terminate and re-originate** (`cert` and `key` given): agents dial the
  recorder with `wss://` and see that certificate (they must trust it — give
  them its CA); the recorder opens its own TLS connection to the hub;
- **record from the agent side** (no certificate): agents dial the recorder
  with plain `ws://` on loopback, and only the recorder speaks TLS to the hub.

Either way the recorder reads every frame. `ca` is the CA bundle the recorder
(and Tetherbed's clients) verify the hub against (default: the system's);
`insecure: true` turns verification off for self-signed test hubs.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.simulator.targets.errors import TargetError


@dataclass(frozen=True, slots=True)
class TlsOptions:
    ca: Path | None = None
    insecure: bool = False
    cert: Path | None = None
    key: Path | None = None

    @classmethod
    def from_mapping(cls, raw: Any, base: Path, where: str) -> TlsOptions:
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise TargetError(f"{where}: tls is a mapping of ca, insecure, cert, key")
        unknown = set(raw) - {"ca", "insecure", "cert", "key"}
        if unknown:
            raise TargetError(f"{where}: unknown tls key(s) {sorted(unknown)}")
        options = cls(
            ca=_path(raw.get("ca"), base),
            insecure=bool(raw.get("insecure", False)),
            cert=_path(raw.get("cert"), base),
            key=_path(raw.get("key"), base),
        )
        if (options.cert is None) != (options.key is None):
            raise TargetError(f"{where}: tls needs both cert and key to terminate TLS")
        for name in ("ca", "cert", "key"):
            path = getattr(options, name)
            if path is not None and not path.is_file():
                raise TargetError(f"{where}: tls.{name} {path} is not a file")
        return options

    @property
    def terminates(self) -> bool:
        return self.cert is not None

    def client_context(self) -> ssl.SSLContext:
        """How the recorder and Tetherbed's clients verify the hub."""
        context = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def server_context(self) -> ssl.SSLContext | None:
        """What the recorder presents to agents (None: agents speak plain ws://)."""
        if self.cert is None or self.key is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.cert), str(self.key))
        return context


def _path(value: Any, base: Path) -> Path | None:
    if value is None:
        return None
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path
