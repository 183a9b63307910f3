"""`--fail-if`: conditions read, units converted, unknown metrics refused (never a pass)."""

from __future__ import annotations

import pytest

from tetherbed.load.fail_if import Condition, ConditionError, evaluate


def test_a_latency_condition_converts_its_unit_to_ms() -> None:
    assert Condition.parse("p99>50ms").value == 50
    assert Condition.parse("p99 > 0.05s").value == pytest.approx(50)
    assert Condition.parse("max>=500us").value == pytest.approx(0.5)


def test_the_conditions_that_hold_are_returned_with_what_was_measured() -> None:
    conditions = [Condition.parse(c) for c in ("p99>50ms", "errors>0", "rps<100")]
    held = evaluate(conditions, {"p99": 72.0, "errors": 0.0, "rps": 80.0})
    assert held == ["p99>50ms (measured 72)", "rps<100 (measured 80)"]


def test_a_metric_the_run_did_not_measure_is_an_error_not_a_pass() -> None:
    with pytest.raises(ConditionError, match="no 'knee_rps'"):
        evaluate([Condition.parse("knee_rps<1000")], {"p99": 1.0, "knee_rps": None})


@pytest.mark.parametrize("text", ["p99", "p99>>5", "errors>0s", "p99>fast", ""])
def test_unreadable_conditions_are_refused(text: str) -> None:
    with pytest.raises(ConditionError):
        Condition.parse(text)
