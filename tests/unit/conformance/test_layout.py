"""Cases judge from the wire: no case module imports the hub or the agent it may be judging.

Only a suite's environment may reach into Tetherbed's parts, and only to set
up what the run shares (a private Xvfb display): never to decide a verdict.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tetherbed.simulator import conformance

PACKAGE = Path(conformance.__file__).resolve().parent
FORBIDDEN = ("tetherbed.hub", "tetherbed.agent")
#: module (relative to the package) -> the only Tetherbed-part imports it may make
ALLOWED = {
    "agent/environment.py": {"tetherbed.agent.desktop.xvfb"},
    "native/environment.py": {"tetherbed.agent.desktop.xvfb"},
    # Client tokens for the users of Tetherbed's own hub, minted before it starts.
    "dsh_hub/environment.py": {"tetherbed.hub.store"},
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_case_module_imports_the_parts_under_test() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        bad = {m for m in _imports(path) if m.startswith(FORBIDDEN)} - ALLOWED.get(name, set())
        if bad:
            offenders.append(f"{name}: {sorted(bad)}")
    assert not offenders, offenders


def test_a_family_is_a_module_the_registry_finds_by_itself() -> None:
    """Every module of a suite package is imported by discovery: nothing lists them."""
    from tetherbed.simulator.conformance import registry

    families = {(c.suite, c.family) for c in registry.cases()}
    for suite in ("agent", "hub", "native", "dsh_hub", "dsh_agent"):
        modules = {
            p.stem
            for p in (PACKAGE / suite).glob("*.py")
            if p.stem not in ("__init__",) and _registers_cases(p)
        }
        assert modules == {f for s, f in families if s == suite.replace("_", "-")}


def _registers_cases(path: Path) -> bool:
    return "@case(" in path.read_text(encoding="utf-8")
