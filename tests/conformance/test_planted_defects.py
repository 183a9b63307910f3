"""Each planted defect fails exactly the cases it should: the test asserts the ids.

In `make test` each defect runs against the cases it must fail and some
neighbours it must leave passing (planted.py says which); `make
conform-defects` runs each against the whole suite
(tests/conformance/full_defects.py) and expects the same ids.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conformance.harness import conform
from tests.conformance.planted import PLANTED, Planted
from tests.third_party.targets import standin_mapping

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def selection(planted: Planted) -> list[str]:
    if planted.cases:
        return [arg for case_id in planted.cases for arg in ("--case", case_id)]
    args = [arg for family in planted.families for arg in ("--family", family)]
    args += [arg for case_id in planted.exclude for arg in ("--exclude", case_id)]
    return args


def check(planted: Planted, tmp_path: Path, *extra: str) -> None:
    report = conform(
        planted.suite,
        *planted.args,
        *extra,
        command=list(planted.command) or None,
        tmp=tmp_path,
    )
    assert not report.ids("error", "unknown"), report.ids("error", "unknown")
    fails, warns = planted.expected(frozenset(c["id"] for c in report.data["cases"]))
    if planted.fails:
        assert fails, f"the selection runs none of {sorted(planted.fails)}"
    assert report.ids("fail") == fails
    assert report.ids("warn") == warns
    assert report.exit_code == (1 if fails else 0)


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: f"{p.suite}-{p.name}")
def test_planted_defect(planted: Planted, tmp_path: Path) -> None:
    if "--xvfb" in planted.args or planted.suite == "native":
        pytest.importorskip("Xlib")  # the desktop extra; never missing with `make venv`
    check(planted, tmp_path, *selection(planted))


def test_standin_hub_silent_last_write_wins(tmp_path: Path) -> None:
    """The stand-in hub's hidden v0 mode shows only on the wire: the ownership cases fail."""
    target = tmp_path / "standin.yaml"
    target.write_text(yaml.safe_dump(standin_mapping("--silent-last-write-wins")), encoding="utf-8")
    report = conform("hub", "--target", str(target), "--family", "ownership", tmp=tmp_path)
    assert report.ids("fail") == {"LE-own-4427-different-machine", "LE-own-4427-same-machine"}


def test_an_expected_failure_does_not_fail_the_run(tmp_path: Path) -> None:
    """--expect-fail with the defect's cases: exit 0; a listed case that passes is reported."""
    planted = next(p for p in PLANTED if p.name == "leak_environment")
    expected = tmp_path / "known.txt"
    expected.write_text("LE-shell-env-no-leak\nLE-shell-cwd  # passes: reported\n")
    report = conform(
        "agent",
        *planted.args,
        "--case",
        "LE-shell-env-no-leak",
        "--case",
        "LE-shell-cwd",
        "--expect-fail",
        str(expected),
        command=list(planted.command),
        tmp=tmp_path,
    )
    assert report.exit_code == 0, report.output[-2000:]
    assert report.data["now_passing"] == ["LE-shell-cwd"]
    assert "passing now: LE-shell-cwd" in report.output


def test_evict_old_passes_under_its_own_profile(tmp_path: Path) -> None:
    report = conform(
        "hub",
        "--hub-arg=--ownership=evict-old",
        "--profile",
        "ownership-4427=evict-old",
        "--case",
        "LE-own-4427-different-machine",
        "--case",
        "LE-own-4427-same-machine",
        tmp=tmp_path,
    )
    assert report.exit_code == 0 and not report.ids("fail", "error"), report.output[-2000:]
    assert report.data["profile"]["ownership-4427"] == "evict-old"


def test_the_documented_table_is_this_table() -> None:
    """docs/conformance.md lists every planted defect with exactly its case ids."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    rows = {line.split("|")[2].strip(): line for line in page.splitlines() if line.startswith("| ")}
    for planted in PLANTED:
        line = rows.get(f"`{planted.switch}`")
        assert line is not None, planted.switch
        for case_id in planted.fails | planted.warns:
            assert f"`{case_id}`" in line, (planted.switch, case_id)


def test_dsh_hub_other_readings(tmp_path: Path) -> None:
    """A hub that reads forwarded headers (cleanly) and cancels at timeout passes under the
    readings that allow it: the profiles, not the cases, decide those two."""
    report = conform(
        "dsh-hub",
        "--hub-arg=--dsh-defect=install_url_from_forwarded_header",
        "--hub-arg=--dsh-no-promote-on-timeout",
        "--profile",
        "install-url-source=forwarded",
        "--profile",
        "timeout-outcome=cancel",
        "--case",
        "DSH-install-url-forwarded",
        "--case",
        "DSH-exec-timeout",
        tmp=tmp_path,
    )
    assert report.exit_code == 0 and report.ids("pass") == {
        "DSH-install-url-forwarded",
        "DSH-exec-timeout",
    }, report.output[-2000:]
    assert report.data["profile"]["timeout-outcome"] == "cancel"
