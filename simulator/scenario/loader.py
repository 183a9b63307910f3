"""Loading scenarios strictly: every key checked against `schema.py`, at load.

`load_all` reads the files (or every `*.yaml` in the folders) given; `parse`
checks one document. With a backend given, what that backend cannot do (a
third-party hub URL on sim, packet loss outside docker) is refused too,
unless the scenario does not run on that backend at all. `check_step`,
`check_topology` and `check_agent_options` give the same checks to the Python
API (`Testbed`, the pytest fixtures), so a typo in a test fails as it would
in a file.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tetherbed.simulator.scenario import control, dsh, generation, schema
from tetherbed.simulator.scenario.model import (
    AgentSpec,
    ClientSpec,
    HubSpec,
    Scenario,
    Step,
    Topology,
)
from tetherbed.simulator.scenario.ports import check_plugging, resolve_port
from tetherbed.simulator.validation import Context, SchemaError, Where

ScenarioError = SchemaError


def load(path: Path, backend: str | None = None) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ScenarioError(Where(str(path)), f"not valid YAML: {exc}") from None
    return parse(data, path, backend)


def shipped_scenarios() -> Path:
    """The folder of the scenarios Tetherbed ships: `scenarios/` in the
    repository, package data in an installed wheel."""
    return Path(str(importlib.resources.files("tetherbed.scenarios")))


def resolve(path: Path) -> Path:
    """`path`, or when it does not exist, the shipped scenario (or folder) of
    that name: `scenarios/partition_race.yaml` works from an installed wheel."""
    if path.exists():
        return path
    shipped = shipped_scenarios()
    if path.name == "scenarios":
        return shipped
    for candidate in (shipped / path.name, shipped / f"{path.name}.yaml"):
        if candidate.is_file():
            return candidate
    return path


def scenario_files(paths: list[Path]) -> list[Path]:
    """Files named directly, or every *.yaml in named folders, sorted; a folder
    without any, or a path that does not exist, is an error."""
    files: list[Path] = []
    for given in paths:
        path = resolve(given)
        if path.is_dir():
            found = sorted(path.glob("*.yaml"))
            if not found:
                raise ScenarioError(Where(str(path)), "no scenarios here (no *.yaml files)")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise ScenarioError(
                Where(str(path)), "no such file or folder (nor a shipped scenario of that name)"
            )
    return files


def load_all(paths: list[Path], backend: str | None = None) -> list[Scenario]:
    return [load(f, backend) for f in scenario_files(paths)]


def parse(data: Any, path: Path | None = None, backend: str | None = None) -> Scenario:
    where = Where(str(path) if path else "<scenario>")
    top = schema.SCENARIO.check(data, where, Context(names={"checkers": schema.CHECKER_NAMES}))
    backends = tuple(top["backends"])
    # A scenario that does not run on this backend is skipped, not refused.
    on = backend if backend in backends else None
    topology = check_topology(top["topology"], where.key("topology"), on)
    context = context_of(topology, on, keys=dsh.created_keys(top.get("steps") or []))
    generate, nemesis = generation.check_generation(
        top.get("generate"), top.get("nemesis"), context, where
    )
    generation.check_fit(generate, nemesis, topology, where)
    steps = []
    for index, raw in enumerate(top.get("steps") or [], 1):
        kind, args = schema.STEP.check(raw, where.at_step(index, None), context)
        args = resolve_port(kind, args, topology, where.at_step(index, kind))
        steps.append(Step(index, kind, args))
    check_plugging(steps, where.file)
    dsh.check_order([(s.kind, s.args) for s in steps], topology, where)
    control.check_order([(s.kind, s.args) for s in steps], where)
    return Scenario(
        name=top["name"],
        path=path,
        description=top["description"].strip(),
        seed=top["seed"],
        topology=topology,
        steps=tuple(steps),
        checkers=tuple(top["checkers"]),
        checker_options=top["checker_options"],
        timeout=float(top["timeout"]),
        backends=backends,
        generate=generate,
        nemesis=nemesis,
        document=dict(data) if isinstance(data, dict) else None,
    )


def context_of(
    topology: Topology, backend: str | None, *, keys: list[str] | None = None
) -> Context:
    """What a step's references resolve against. `keys`: the ids of the file's
    create_key steps (None: any, as for a step given on its own)."""
    agents = list(topology.agents)
    names: dict[str, list[str] | tuple[str, ...]] = {
        "agents": agents,
        "clients": list(topology.clients),
        "nodes": ["hub", *agents],
        "sessions": topology.sessions(),
        "checkers": schema.CHECKER_NAMES,
        **dsh.context_names(topology),
        **control.context_names(topology),
    }
    if keys is not None:
        names["keys"] = keys
    return Context(backend, names)


def check_topology(raw: Any, where: Where, backend: str | None = None) -> Topology:
    checked = schema.TOPOLOGY.check(raw, where, Context(backend))
    hub = checked["hub"]
    agents = {}
    for name, spec in checked["agents"].items():
        machine = spec.get("machine") or name
        agents[name] = AgentSpec(
            name=name,
            machine=machine,
            session=spec.get("session"),
            user=spec["user"],
            root=spec.get("root") or machine,
            options=dict(spec["options"]),
            command=list(spec["command"]) if "command" in spec else None,
            transport=spec["transport"],
            token_of=spec.get("token_of"),
            control=dict(spec["control"]) if "control" in spec else None,
        )
    clients = {
        name: ClientSpec(name, spec.get("session"), spec["user"], spec["api"], spec.get("machine"))
        for name, spec in checked["clients"].items()
    }
    return Topology(HubSpec(options=dict(hub["options"]), url=hub.get("url")), agents, clients)


def check_step(kind: str, args: Any, topology: Topology, backend: str | None, where: Where) -> Any:
    """One step's argument, checked as it would be in a file (for `Testbed`)."""
    _, checked = schema.STEP.check({kind: args}, where, context_of(topology, backend))
    return resolve_port(kind, checked, topology, where)


def check_agent_options(options: Mapping[str, Any], where: Where) -> dict[str, Any]:
    return schema.AGENT_OPTIONS.check(dict(options), where, Context())


def check_hub_options(options: Mapping[str, Any], where: Where) -> dict[str, Any]:
    return schema.HUB_OPTIONS.check(dict(options), where, Context())
