"""The registry: suites and their cases, collected from the modules that declare them.

The core never lists cases. A suite (`agent`, `hub`, `native`, ...) is a
package under `tetherbed.simulator.conformance` whose `__init__` calls
`register_suite`; a family of cases is a module in it whose functions carry
`@case(...)`. `discover()` imports every module of every such package, so a
new family is a new module and a new suite a new package — nothing else
changes (docs/conformance.md, "Adding a family").
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tetherbed.simulator.conformance.case import Case, Check
from tetherbed.simulator.conformance.levels import Level

#: Case ids: a spec prefix and words joined by dashes (LE-files-read-crlf).
ID_PATTERN = re.compile(r"^[A-Z]{2,4}(-[a-z0-9]+)+$")


@dataclass(frozen=True, slots=True)
class Suite:
    """One kind of target: how to read its command line and how to run cases on it."""

    name: str
    #: Case id prefix of its spec ("LE", "CD").
    prefix: str
    #: The spec, by project and version.
    spec: str
    description: str
    #: Adds the suite's own options to `tetherbed conform NAME`.
    add_arguments: Callable[[Any], None]
    #: Builds the environment from the parsed options (see environment.py).
    environment: Callable[..., Any]
    #: Cases run at once by default.
    concurrency: int = 4


_SUITES: dict[str, Suite] = {}
_CASES: dict[str, Case] = {}
_STATE = {"discovered": False}


def register_suite(suite: Suite) -> Suite:
    known = _SUITES.get(suite.name)
    if known is not None and known is not suite:
        raise ValueError(f"suite {suite.name} registered twice")
    _SUITES[suite.name] = suite
    return suite


def case(
    case_id: str,
    *,
    level: Level,
    section: str,
    rule: str,
    suite: str | None = None,
    needs: Iterable[str] = (),
    locks: Iterable[str] = (),
    reads: Iterable[str] = (),
    timeout: float = 60.0,
    last: bool = False,
    **options: Any,
) -> Callable[[Check], Check]:
    """Register the decorated coroutine as a case of its module's suite."""

    def register(check: Check) -> Check:
        module = check.__module__
        family = module.rsplit(".", 1)[-1]
        owner = suite or _suite_of_module(module)
        if not ID_PATTERN.match(case_id):
            raise ValueError(f"case id {case_id!r} is not PREFIX-words-with-dashes")
        if case_id in _CASES:
            raise ValueError(f"case id {case_id} registered twice")
        _CASES[case_id] = Case(
            id=case_id,
            suite=owner,
            level=level,
            section=section,
            rule=" ".join(rule.split()),
            check=check,
            family=family,
            needs=frozenset(needs),
            locks=frozenset(locks),
            reads=tuple(reads),
            timeout=timeout,
            last=last,
            options=dict(options),
        )
        return check

    return register


def _suite_of_module(module: str) -> str:
    """`tetherbed.simulator.conformance.agent.files` belongs to suite `agent`."""
    parts = module.split(".")
    try:
        index = parts.index("conformance")
    except ValueError:
        raise ValueError(f"{module}: name the suite, case(..., suite=NAME)") from None
    if len(parts) < index + 3:
        raise ValueError(f"{module}: a family module lives in a suite package")
    return parts[index + 1].replace("_", "-")


def discover() -> None:
    """Import every module under the conformance package (once)."""
    if _STATE["discovered"]:
        return
    package = importlib.import_module("tetherbed.simulator.conformance")
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
    _STATE["discovered"] = True
    for found in _CASES.values():
        suite = _SUITES.get(found.suite)
        if suite is None:
            raise ValueError(f"case {found.id} belongs to unknown suite {found.suite}")
        if not found.id.startswith(suite.prefix + "-"):
            raise ValueError(f"case {found.id} of suite {suite.name} must start {suite.prefix}-")


def suites() -> dict[str, Suite]:
    discover()
    return dict(_SUITES)


def cases(suite: str | None = None) -> list[Case]:
    discover()
    return sorted(
        (c for c in _CASES.values() if suite is None or c.suite == suite), key=lambda c: c.id
    )


def case_ids() -> set[str]:
    discover()
    return set(_CASES)
