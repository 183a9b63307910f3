"""Scenario files: a topology, steps to run against it, and checkers to apply.

The format is documented in docs/scenarios.md. Parsing validates everything
up front — unknown keys, wrong types, references to undeclared nodes — and
reports the file, the step number and what is wrong, so a typo never turns
into a confusing failure halfway through a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tetherbed.wire.messages import MessageType

#: Default checkers when a scenario names none.
DEFAULT_CHECKERS = (
    "single_owner",
    "exactly_one_answer",
    "no_double_execution",
    "no_reconnect_after_fatal",
    "backoff_bounds",
    "no_crossed_answers",
    "file_contents",
)

STEP_KINDS = (
    "start",
    "stop",
    "kill",
    "restart",
    "pause",
    "resume",
    "partition",
    "heal",
    "fault",
    "clear",
    "send",
    "expect",
    "wait",
    "assert",
    "revoke",
    "note",
)

HUB_OPTIONS = {
    "max_concurrent": int,
    "max_file_size": int,
    "command_timeout": int,
    "ping_interval": float,
    "pong_timeout": float,
    "retry_window": float,
    "queue_limit": int,
    "ownership": str,
    "protocol_version": str,
    "defects": list,
    # For a third-party hub (hub.url): {user: {agent: TOKEN, client: TOKEN}}.
    "tokens": dict,
}

AGENT_OPTIONS = {
    "shell": bool,
    "max_concurrent": int,
    "protocol_version": str,
    "defects": list,
    "files": dict,
}


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message says where and why."""


@dataclass(frozen=True)
class HubSpec:
    options: dict[str, Any] = field(default_factory=dict)
    #: A third-party hub to test instead of the reference one (process backend).
    url: str | None = None


@dataclass(frozen=True)
class AgentSpec:
    name: str
    machine: str
    session: str
    user: str = "alice"
    #: The machine's folder; agents of one machine share it by default.
    root: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    #: A third-party agent command to run instead of the reference agent.
    command: list[str] | None = None

    @property
    def shell(self) -> bool:
        return bool(self.options.get("shell", False))


@dataclass(frozen=True)
class ClientSpec:
    name: str
    session: str
    user: str = "alice"


@dataclass(frozen=True)
class Topology:
    hub: HubSpec
    agents: dict[str, AgentSpec]
    clients: dict[str, ClientSpec]

    def node(self, name: str) -> HubSpec | AgentSpec:
        if name == "hub":
            return self.hub
        return self.agents[name]


@dataclass(frozen=True)
class Step:
    index: int
    kind: str
    args: Any

    def describe(self) -> str:
        return f"{self.kind} {self.args}" if self.args not in (None, {}) else self.kind


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path | None
    description: str
    seed: int
    topology: Topology
    steps: tuple[Step, ...]
    checkers: tuple[str, ...]
    #: Checker options, by checker name.
    checker_options: dict[str, dict[str, Any]]
    #: Seconds the run may take before it is an error (virtual on sim).
    timeout: float
    #: Backends the scenario supports (default: all).
    backends: tuple[str, ...]


def load(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    return parse(data, path)


def load_all(paths: list[Path]) -> list[Scenario]:
    """Scenario files named directly, or every *.yaml in named folders, sorted."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.yaml")))
        else:
            files.append(path)
    return [load(f) for f in files]


def parse(data: Any, path: Path | None = None) -> Scenario:
    where = str(path) if path else "<scenario>"
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: a scenario is a mapping")
    _only(
        data,
        where,
        {
            "name",
            "description",
            "seed",
            "topology",
            "steps",
            "checkers",
            "checker_options",
            "timeout",
            "backends",
        },
    )
    name = _text(data, "name", where)
    topology = _topology(data.get("topology"), where)
    steps = tuple(
        _step(i, raw, topology, where) for i, raw in enumerate(_list(data, "steps", where), 1)
    )
    checkers = tuple(data.get("checkers") or DEFAULT_CHECKERS)
    for checker in checkers:
        if not isinstance(checker, str):
            raise ScenarioError(f"{where}: checkers are names, got {checker!r}")
    options = data.get("checker_options") or {}
    if not isinstance(options, dict):
        raise ScenarioError(f"{where}: checker_options is a mapping of checker → options")
    backends = tuple(data.get("backends") or ("sim", "process", "docker"))
    return Scenario(
        name=name,
        path=path,
        description=str(data.get("description", "")).strip(),
        seed=int(data.get("seed", 1)),
        topology=topology,
        steps=steps,
        checkers=checkers,
        checker_options={str(k): dict(v or {}) for k, v in options.items()},
        timeout=float(data.get("timeout", 600)),
        backends=backends,
    )


def _topology(raw: Any, where: str) -> Topology:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: topology must be a mapping with hub, agents, clients")
    _only(raw, f"{where}: topology", {"hub", "agents", "clients"})
    hub_raw = raw.get("hub") or {}
    _only(hub_raw, f"{where}: topology.hub", {"options", "url"})
    hub_options = dict(hub_raw.get("options") or {})
    _typed(hub_options, HUB_OPTIONS, f"{where}: topology.hub.options")
    hub = HubSpec(options=hub_options, url=hub_raw.get("url"))
    agents: dict[str, AgentSpec] = {}
    for name, spec in (raw.get("agents") or {}).items():
        at = f"{where}: topology.agents.{name}"
        if name == "hub" or not isinstance(spec, dict):
            raise ScenarioError(f"{at}: an agent is a mapping, and 'hub' is reserved")
        _only(spec, at, {"machine", "session", "user", "root", "options", "command"})
        options = dict(spec.get("options") or {})
        _typed(options, AGENT_OPTIONS, f"{at}.options")
        machine = str(spec.get("machine") or name)
        agents[name] = AgentSpec(
            name=name,
            machine=machine,
            session=_text(spec, "session", at),
            user=str(spec.get("user", "alice")),
            root=str(spec.get("root") or machine),
            options=options,
            command=list(spec["command"]) if spec.get("command") else None,
        )
    clients: dict[str, ClientSpec] = {}
    for name, spec in (raw.get("clients") or {}).items():
        at = f"{where}: topology.clients.{name}"
        if not isinstance(spec, dict):
            raise ScenarioError(f"{at}: a client is a mapping")
        _only(spec, at, {"session", "user"})
        clients[name] = ClientSpec(name, _text(spec, "session", at), str(spec.get("user", "alice")))
    clash = set(agents) & set(clients)
    if clash:
        raise ScenarioError(f"{where}: names used for both an agent and a client: {sorted(clash)}")
    return Topology(hub, agents, clients)


def _step(index: int, raw: Any, topology: Topology, where: str) -> Step:
    at = f"{where}: step {index}"
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ScenarioError(
            f"{at}: a step is a mapping with exactly one of {', '.join(STEP_KINDS)}"
        )
    ((kind, args),) = raw.items()
    if kind not in STEP_KINDS:
        raise ScenarioError(f"{at}: unknown step {kind!r} (one of {', '.join(STEP_KINDS)})")
    nodes = {"hub", *topology.agents}
    if kind in ("start", "stop", "kill", "restart", "pause", "resume"):
        if args not in nodes:
            raise ScenarioError(f"{at}: {kind} needs the hub or an agent name, got {args!r}")
    elif kind in ("partition", "fault"):
        if not isinstance(args, dict) or args.get("agent") not in topology.agents:
            raise ScenarioError(f"{at}: {kind} needs `agent:` naming a declared agent")
        if kind == "fault" and "kind" not in args:
            raise ScenarioError(f"{at}: fault needs `kind:`")
    elif kind in ("heal", "clear"):
        if args != "all" and not (isinstance(args, dict) and args.get("agent") in topology.agents):
            raise ScenarioError(f"{at}: {kind} takes `all` or `agent:` naming a declared agent")
    elif kind == "send":
        if not isinstance(args, dict) or args.get("client") not in topology.clients:
            raise ScenarioError(f"{at}: send needs `client:` naming a declared client")
        _only(args, at, {"client", "id", "type", "payload"})
        try:
            MessageType(args.get("type"))
        except ValueError:
            raise ScenarioError(
                f"{at}: send type {args.get('type')!r} is not a message type"
            ) from None
        if not args.get("id"):
            raise ScenarioError(f"{at}: send needs an `id:` to refer to its answer")
    elif kind == "expect":
        if not isinstance(args, dict) or not ({"client", "agent", "event", "hub"} & set(args)):
            raise ScenarioError(f"{at}: expect needs `client:`, `agent:`, `hub:` or `event:`")
        for key in ("client", "agent"):
            if key in args:
                known = topology.clients if key == "client" else topology.agents
                if args[key] not in known:
                    raise ScenarioError(f"{at}: expect names an undeclared {key} {args[key]!r}")
    elif kind == "wait":
        if not isinstance(args, (int, float)) or args < 0:
            raise ScenarioError(f"{at}: wait takes a number of seconds")
    elif kind == "assert":
        if not isinstance(args, dict):
            raise ScenarioError(f"{at}: assert takes a mapping of conditions")
    elif kind == "revoke" and not isinstance(args, str):
        raise ScenarioError(f"{at}: revoke takes a session id")
    return Step(index, kind, args)


def _only(mapping: Any, at: str, allowed: set[str]) -> None:
    if not isinstance(mapping, dict):
        raise ScenarioError(f"{at}: expected a mapping")
    unknown = set(mapping) - allowed
    if unknown:
        raise ScenarioError(f"{at}: unknown key(s) {sorted(unknown)} (allowed: {sorted(allowed)})")


def _typed(options: dict[str, Any], types: dict[str, type], at: str) -> None:
    for key, value in options.items():
        expected = types.get(key)
        if expected is None:
            raise ScenarioError(f"{at}: unknown option {key!r} (allowed: {sorted(types)})")
        if expected is float and isinstance(value, int):
            continue
        if not isinstance(value, expected):
            raise ScenarioError(f"{at}: {key} must be {expected.__name__}, got {value!r}")


def _text(mapping: dict[str, Any], key: str, at: str) -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{at}: `{key}` is required and must be text")
    return value


def _list(mapping: dict[str, Any], key: str, at: str) -> list[Any]:
    value = mapping.get(key)
    if not isinstance(value, list) or not value:
        raise ScenarioError(f"{at}: `{key}` must be a non-empty list")
    return value
