"""Checkers: pure functions from a run's history to a verdict with evidence.

"One history, many checkers" (docs/architecture.md): backends only record what
happened; each property of the protocol is judged here, the same way for every
backend.
`run_checkers` never lets a checker's crash hide the others' verdicts.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from tetherbed.simulator.checkers import (
    backoff_bounds,
    control_children,
    crossed_answers,
    double_execution,
    exactly_one_answer,
    file_contents,
    llm_streams,
    reconnect_after_fatal,
    revocation,
    serial_io,
    single_owner,
)
from tetherbed.simulator.checkers.dsh import (
    chunks,
    executions,
    install_url,
    keys,
    presence,
    streams,
)
from tetherbed.simulator.checkers.verdict import Checker, Verdict
from tetherbed.simulator.history import History

__all__ = ["CHECKERS", "MODULES", "Checker", "Verdict", "checker_options", "run_checkers"]

#: Each checker's module by the name scenarios use (module names need not match).
MODULES: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        single_owner,
        double_execution,
        exactly_one_answer,
        reconnect_after_fatal,
        backoff_bounds,
        crossed_answers,
        file_contents,
        llm_streams,
        serial_io,
        # dsh-computers (checkers/dsh/)
        presence,
        streams,
        executions,
        chunks,
        keys,
        install_url,
        # control mode (children of a machine's control agent)
        control_children,
        # the hub's side of revocation (hub/admission.py)
        revocation,
    )
}
CHECKERS: dict[str, Checker] = {name: module.check for name, module in MODULES.items()}


def checker_options(name: str) -> dict[str, Any]:
    """A checker's options and their defaults (for docs and scenario validation)."""
    signature = inspect.signature(CHECKERS[name])
    return {
        p.name: p.default
        for p in signature.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def run_checkers(
    history: History,
    names: Iterable[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Verdict]:
    """Run the named checkers (all when None), in the order given.

    `options` maps a checker name to its keyword options. An unknown checker
    or option is a scenario mistake and raises ValueError before anything
    runs; a checker that crashes on the history yields an `error` verdict with
    `error` set (the run is an error, not a failure of the system under test,
    and never a pass).
    """
    chosen = list(dict.fromkeys(CHECKERS if names is None else names))
    options = options or {}
    unknown = sorted(set(chosen) - set(CHECKERS)) + sorted(set(options) - set(CHECKERS))
    if unknown:
        raise ValueError(f"unknown checker(s) {unknown}; known: {sorted(CHECKERS)}")
    for name, given in options.items():
        extra = sorted(set(given) - set(checker_options(name)))
        if extra:
            raise ValueError(
                f"checker {name} has no option(s) {extra}; it takes {sorted(checker_options(name))}"
            )
    verdicts: list[Verdict] = []
    for name in chosen:
        try:
            verdict = CHECKERS[name](history, **dict(options.get(name, {})))
        except Exception as exc:  # a checker bug must not hide the other verdicts
            verdict = Verdict.crashed(name, exc)
        verdicts.append(verdict)
    return verdicts
