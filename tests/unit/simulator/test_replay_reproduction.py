"""What counts as reproducing a recorded run when its decision log is replayed."""

from __future__ import annotations

from tetherbed.simulator.explore.reproduce import _reproduced, failure_signature
from tetherbed.simulator.runner import RunOutcome


def outcome(step_failure: str | None = None) -> RunOutcome:
    return RunOutcome(
        scenario=None,  # type: ignore[arg-type]
        backend="process",
        seed=5,
        history=None,  # type: ignore[arg-type]
        verdicts=[],
        error=None,
        step_failure=step_failure,
        seconds=1.0,
    )


def test_the_same_failure_reproduces_it():
    failed = outcome("step 7 (expect ...): outcome info")
    assert failure_signature(failed) == ["step"]
    assert _reproduced(failed, {"verdict": "fail", "failed": ["step"]})
    assert not _reproduced(failed, {"verdict": "fail", "failed": ["exactly_one_answer"]})
    assert not _reproduced(outcome(), {"verdict": "fail", "failed": ["step"]})


def test_a_pass_reproduces_a_passing_log_and_any_failure_one_without_verdict():
    assert _reproduced(outcome(), {"verdict": "pass", "failed": []})
    assert not _reproduced(outcome("step 1: no"), {"verdict": "pass", "failed": []})
    assert _reproduced(outcome("step 1: no"), None)
    assert not _reproduced(outcome(), None)
