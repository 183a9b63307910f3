"""docs/conformance-coverage.md against the spec texts and the case registry.

The spec texts are kept in tests/fixtures/specs (the public documents as
Tetherbed implements them). The check fails on a normative sentence no row
quotes, a quote not in the spec, a case id that does not exist, a row with
neither a case nor a reason, and a case keyed to no sentence.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.simulator.conformance import registry
from tetherbed.simulator.conformance.coverage import normative, problems, rows

ROOT = Path(__file__).resolve().parents[3]
DOCUMENT = ROOT / "docs" / "conformance-coverage.md"
SPECS = {
    "local-executor": ROOT / "tests" / "fixtures" / "specs" / "local-executor-PROTOCOL.md",
    "crossdesk-automation/1": ROOT
    / "tests"
    / "fixtures"
    / "specs"
    / "crossdesk-automation-PROTOCOL.md",
    "dsh-computers contract v1": ROOT
    / "tests"
    / "fixtures"
    / "specs"
    / "dsh-computers-PROTOCOL.md",
}
PREFIXES = {
    "local-executor": "LE-",
    "crossdesk-automation/1": "CD-",
    "dsh-computers contract v1": "DSH-",
}


def _texts() -> dict[str, str]:
    return {name: path.read_text(encoding="utf-8") for name, path in SPECS.items()}


def _case_ids() -> dict[str, set[str]]:
    return {
        name: {c.id for c in registry.cases() if c.id.startswith(prefix)}
        for name, prefix in PREFIXES.items()
    }


def test_every_normative_sentence_is_mapped_to_existing_cases() -> None:
    found = problems(DOCUMENT.read_text(encoding="utf-8"), _texts(), _case_ids())
    assert not found, "\n".join(found)


def test_the_specs_have_the_sentences_the_table_needs() -> None:
    """The extraction finds what a reader would call the rules (a guard on the check itself)."""
    texts = _texts()
    le = normative(texts["local-executor"])
    assert "Shim must respond with PONG within 10s or connection is dropped." in le
    assert "The rejected shim MUST NOT auto-reconnect." in le
    assert any("Coordinates must satisfy" in s for s in normative(texts["crossdesk-automation/1"]))
    table = rows(DOCUMENT.read_text(encoding="utf-8"), texts)
    assert len([r for r in table if r.spec == "local-executor"]) >= len(le)


@pytest.mark.parametrize(
    "mutation, expected",
    [
        (lambda doc: doc.replace("| LE.", "| XX.", 1).replace("Protocol: WebSocket", "~", 1),
         "not in the spec"),
        (lambda doc: doc.replace("`LE-keepalive-pong`", "`LE-keepalive-ponged`"), "no such case"),
        (lambda doc: "\n".join(
            line for line in doc.splitlines() if "Shim must respond with PONG" not in line),
         "no row quotes"),
        (lambda doc: doc.replace("`LE-status-cadence`, `LE-status-fields`", "the cadence"),
         "gives no reason"),
    ],
)  # fmt: skip
def test_a_broken_table_is_caught(mutation, expected: str) -> None:  # type: ignore[no-untyped-def]
    broken = mutation(DOCUMENT.read_text(encoding="utf-8"))
    found = problems(broken, _texts(), _case_ids())
    assert any(expected in p for p in found), found


def test_a_case_keyed_to_nothing_is_caught() -> None:
    ids = _case_ids()
    ids["local-executor"] = ids["local-executor"] | {"LE-made-up-case"}
    found = problems(DOCUMENT.read_text(encoding="utf-8"), _texts(), ids)
    assert any("LE-made-up-case is keyed to no sentence" in p for p in found)
