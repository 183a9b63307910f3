"""The hub under test: Tetherbed's own, one already running at a URL, or a command.

- **Tetherbed's hub** (the default) is started, killed and restarted by the
  backend, which also creates its tokens.
- **A URL** (`url: wss://hub.example:8443`): someone else's running hub.
  Tetherbed cannot start, stop or restart it; scenarios that do are refused.
- **A command** (`command: [...]`, with `url` a template): Tetherbed starts
  it, kills it (SIGKILL), stops it (SIGTERM), restarts it, and gives every run
  a fresh `{state}` folder, which is how it is reset between cases (`reset`, a
  command run before each start, may do more).

Placeholders in `command`, `url`, `reset` and `tokens`: `{host}` (127.0.0.1),
`{port}` (a free port Tetherbed picked), `{state}` (the run's state folder),
`{users}` (the users the run needs, comma-separated) and `{options}` (the
scenario's hub options as JSON, for a hub that wants to honour them).

Tokens come from a file (`tokens`, YAML or JSON), `{user: {agent: TOKEN,
client: TOKEN}}`, read when the hub is up (a started hub may write it
itself), or inline (`tokens: {alice: {...}}`). A hub is up when its port
accepts connections, or when `ready` (an HTTP path such as `/healthz`)
answers 2xx, within `ready_timeout` seconds (default 30).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tetherbed.simulator.targets.errors import TargetError
from tetherbed.simulator.targets.templates import (
    check_placeholders,
    fill,
    fill_one,
    parse_command,
)

PLACEHOLDERS = ("host", "port", "state", "users", "options")
KINDS = ("agent", "client")


@dataclass(frozen=True, slots=True)
class Tokens:
    """Bearer tokens by (user, kind); kind is `agent` or `client`."""

    table: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def get(self, user: str, kind: str) -> str:
        try:
            return self.table[user, kind]
        except KeyError:
            raise TargetError(f"no {kind} token for user {user!r} in the hub's tokens") from None

    def users(self) -> set[str]:
        return {user for user, _ in self.table}

    @classmethod
    def parse(cls, raw: Any, where: str) -> Tokens:
        if not isinstance(raw, Mapping):
            raise TargetError(f"{where}: tokens are {{user: {{agent: TOKEN, client: TOKEN}}}}")
        table: dict[tuple[str, str], str] = {}
        for user, kinds in raw.items():
            if not isinstance(kinds, Mapping) or not kinds:
                raise TargetError(f"{where}: tokens of {user!r} are {{agent: T, client: T}}")
            for kind, token in kinds.items():
                if kind not in KINDS or not isinstance(token, str) or not token:
                    raise TargetError(f"{where}: {user}.{kind} must be a token of kind {KINDS}")
                table[str(user), str(kind)] = token
        return cls(table)

    @classmethod
    def read(cls, path: Path) -> Tokens:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TargetError(f"cannot read the hub's tokens from {path}: {exc}") from None
        try:
            raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise TargetError(f"{path}: not valid {path.suffix or 'YAML'}: {exc}") from None
        return cls.parse(raw, str(path))


@dataclass(frozen=True, slots=True)
class HubTarget:
    #: The hub's base URL (`ws://` or `wss://`), a template when `command` is set.
    url: str | None = None
    command: tuple[str, ...] | None = None
    reset: tuple[str, ...] | None = None
    #: A tokens file (a template), or tokens given inline.
    tokens_file: str | None = None
    tokens: Tokens | None = None
    ready: str | None = None
    ready_timeout: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    #: Where relative paths in the target file are taken from.
    base: Path = Path()

    @classmethod
    def reference(cls) -> HubTarget:
        return cls()

    @property
    def is_reference(self) -> bool:
        return self.url is None and self.command is None

    @property
    def startable(self) -> bool:
        """Tetherbed can start, kill and restart it (the reference, or a command)."""
        return self.url is None or self.command is not None

    @classmethod
    def from_mapping(cls, raw: Any, base: Path, where: str) -> HubTarget:
        if raw is None:
            return cls.reference()
        if isinstance(raw, str):
            raw = {"url": raw}
        if not isinstance(raw, dict):
            raise TargetError(f"{where}: hub is a URL or a mapping")
        allowed = {"url", "command", "reset", "tokens", "ready", "ready_timeout", "env"}
        unknown = set(raw) - allowed
        if unknown:
            raise TargetError(f"{where}: unknown hub key(s) {sorted(unknown)} ({sorted(allowed)})")
        url = raw.get("url")
        command = parse_command(raw["command"], f"{where}.command") if raw.get("command") else None
        reset = parse_command(raw["reset"], f"{where}.reset") if raw.get("reset") else None
        if url is None and command is None:
            if raw.get("tokens") is not None:
                raise TargetError(f"{where}: tokens are for a hub given by url or command")
            return cls.reference()
        if not isinstance(url, str):
            raise TargetError(f"{where}: a hub started by a command needs its `url` (a template)")
        for parts, name in ((command or (), "command"), (reset or (), "reset"), ((url,), "url")):
            check_placeholders(parts, PLACEHOLDERS if command else (), f"{where}.{name}")
        scheme = urlsplit(fill_one(url, dict.fromkeys(PLACEHOLDERS, "0"))).scheme
        if scheme not in ("ws", "wss"):
            raise TargetError(f"{where}.url: a ws:// or wss:// base URL, not {url!r}")
        tokens_raw = raw.get("tokens")
        tokens_file = tokens = None
        if isinstance(tokens_raw, str):
            check_placeholders([tokens_raw], PLACEHOLDERS, f"{where}.tokens")
            tokens_file = tokens_raw
        elif tokens_raw is not None:
            tokens = Tokens.parse(tokens_raw, f"{where}.tokens")
        else:
            raise TargetError(f"{where}: a third-party hub needs `tokens` (a file or a mapping)")
        ready = raw.get("ready")
        if ready is not None and (not isinstance(ready, str) or not ready.startswith("/")):
            raise TargetError(f"{where}.ready: an HTTP path such as /healthz")
        env = {str(k): str(v) for k, v in (raw.get("env") or {}).items()}
        return cls(
            url=url,
            command=command,
            reset=reset,
            tokens_file=tokens_file,
            tokens=tokens,
            ready=ready,
            ready_timeout=float(raw.get("ready_timeout", 30.0)),
            env=env,
            base=base,
        )

    # --- filling in ------------------------------------------------------------------

    def values(self, *, port: int, state: Path, users: list[str]) -> dict[str, object]:
        return {"host": "127.0.0.1", "port": port, "state": state, "users": ",".join(users)}

    def resolved_url(self, values: Mapping[str, object]) -> str:
        assert self.url is not None
        return fill_one(self.url, values).rstrip("/")

    def argv(self, values: Mapping[str, object]) -> list[str]:
        assert self.command is not None
        return fill(self.command, values)

    def reset_argv(self, values: Mapping[str, object]) -> list[str] | None:
        return fill(self.reset, values) if self.reset else None

    def environment(self, values: Mapping[str, object]) -> dict[str, str]:
        return {name: fill_one(value, values) for name, value in self.env.items()}

    def load_tokens(self, values: Mapping[str, object]) -> Tokens:
        if self.tokens is not None:
            return self.tokens
        assert self.tokens_file is not None
        path = Path(fill_one(self.tokens_file, values)).expanduser()
        return Tokens.read(path if path.is_absolute() else self.base / path)


@dataclass(frozen=True, slots=True)
class HubAccess:
    """What an adapter needs to reach a running hub."""

    url: str  # ws:// or wss:// base
    tokens: Tokens
    ssl: Any = None  # ssl.SSLContext for wss://, else None

    @property
    def http_url(self) -> str:
        scheme, rest = self.url.split("://", 1)
        return ("https" if scheme == "wss" else "http") + "://" + rest
