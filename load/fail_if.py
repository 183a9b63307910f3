"""`--fail-if 'p99>50ms' --fail-if 'errors>0'`: the exit status CI reads.

A condition is `METRIC OP VALUE[UNIT]` with OP one of `> >= < <= == !=`.
Metrics are the run's figures (every request of the run's main type: the
relay's client requests, the storm's reconnects, ...), plus what the profile
measured: `p50`, `p95`, `p99`, `max`, `mean` (ms; `s` and `us` accepted),
`errors` (failed requests), `error_rate` (%), `rps`, `requests`, and per
profile `knee_rps`, `echo_ratio`, `lost`, `twice`, `recovery_s`,
`refused`, `takeovers_per_s`, `fps_ratio`. A condition that holds fails the run
(exit status 1); one that names a metric the run did not measure is an error
(exit status 2), never a silent pass.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_UNITS = {"ms": 1.0, "s": 1000.0, "us": 0.001, "%": 1.0, "": 1.0}
#: Metrics whose values are milliseconds (a unit converts to ms for them).
TIME_METRICS = frozenset({"p50", "p95", "p99", "max", "mean"})
_PATTERN = re.compile(
    r"^\s*(?P<metric>[a-z_0-9]+)\s*(?P<op>>=|<=|==|!=|>|<)\s*"
    r"(?P<value>[0-9]*\.?[0-9]+)\s*(?P<unit>ms|s|us|%)?\s*$"
)


class ConditionError(ValueError):
    """A condition that cannot be read, or that names a metric the run lacks."""


@dataclass(frozen=True, slots=True)
class Condition:
    text: str
    metric: str
    op: str
    value: float

    @classmethod
    def parse(cls, text: str) -> Condition:
        match = _PATTERN.match(text)
        if match is None:
            raise ConditionError(
                f"--fail-if {text!r}: expected METRIC OP VALUE[UNIT], e.g. 'p99>50ms' or 'errors>0'"
            )
        metric, unit = match["metric"], match["unit"] or ""
        value = float(match["value"])
        if unit in ("s", "us"):
            if metric not in TIME_METRICS:
                raise ConditionError(f"--fail-if {text!r}: {unit} is for latencies only")
            value *= _UNITS[unit]
        return cls(text.strip(), metric, match["op"], value)

    def holds(self, metrics: Mapping[str, float | None]) -> bool:
        if self.metric not in metrics or metrics[self.metric] is None:
            known = ", ".join(sorted(k for k, v in metrics.items() if v is not None))
            raise ConditionError(
                f"--fail-if {self.text!r}: this run measured no {self.metric!r} (it has: {known})"
            )
        found = metrics[self.metric]
        assert found is not None
        return _OPERATORS[self.op](found, self.value)


def evaluate(conditions: list[Condition], metrics: Mapping[str, float | None]) -> list[str]:
    """The conditions that hold (each one fails the run), with the value found."""
    failed = []
    for condition in conditions:
        if condition.holds(metrics):
            failed.append(f"{condition.text} (measured {metrics[condition.metric]:g})")
    return failed
