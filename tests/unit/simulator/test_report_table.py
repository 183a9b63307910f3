"""The console table: aligned columns, stable order, replay lines for failures."""

from __future__ import annotations

import io

import pytest

from tetherbed.simulator.checkers import Verdict
from tetherbed.simulator.reports.results import RunResult
from tetherbed.simulator.reports.table import HEADERS, print_table, render_table


def runs() -> list[RunResult]:
    return [
        RunResult(
            "silent-takeover",
            "s/t.yaml",
            "sim",
            42,
            "fail",
            12.345,
            [
                Verdict("single_owner", False, "two owners", []),
                Verdict("file_contents", False, "lost write", []),
                Verdict("backoff_bounds", True, "ok", []),
            ],
            None,
            "tetherbed run s/t.yaml --backend sim --seed 42",
        ),
        RunResult("basic", "s/b.yaml", "process", None, "pass", 1.0, [], None, "x"),
        RunResult(
            "boot",
            "s/boot.yaml",
            "process",
            1,
            "error",
            0.0,
            [],
            "hub did not start\ntraceback",
            "tetherbed run s/boot.yaml --backend process",
        ),
    ]


def test_columns_are_aligned_and_sorted() -> None:
    text = render_table(runs())
    lines = text.splitlines()
    assert lines[0].split(" | ") == [h.ljust(len(h)) for h in lines[0].split(" | ")]
    assert [c.strip() for c in lines[0].split("|")] == list(HEADERS)
    rows = lines[2:5]
    assert [r.split("|")[0].strip() for r in rows] == ["basic", "boot", "silent-takeover"]
    bars = {tuple(i for i, ch in enumerate(line) if ch == "|") for line in [lines[0], *rows]}
    assert len(bars) == 1  # every separator in the same column
    assert "12.35" in rows[2] and rows[2].rstrip().endswith("42")
    assert rows[0].rstrip().endswith("-")  # no seed
    assert "3 run(s): 1 pass, 1 fail, 1 error" in text


def test_failures_list_the_cause_and_the_replay_command() -> None:
    text = render_table(runs())
    replay = text.split("To replay:")[1]
    assert "silent-takeover [sim, seed 42] fail: file_contents, single_owner" in replay
    assert "    tetherbed run s/t.yaml --backend sim --seed 42" in replay
    assert "boot [process, seed 1] error: hub did not start" in replay
    assert "basic" not in replay


def test_colour_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "\x1b[" not in render_table(runs())
    assert "\x1b[31m" in render_table(runs(), colour=True)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = Tty()
    print_table(runs(), stream)
    assert "\x1b[" in stream.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    stream = Tty()
    print_table(runs(), stream)
    assert "\x1b[" not in stream.getvalue()
    plain = io.StringIO()
    print_table(runs(), plain)
    assert plain.getvalue() == render_table(runs())


def test_all_passing_has_no_replay_section() -> None:
    text = render_table([RunResult("a", "a.yaml", "sim", 1, "pass", 0.1)])
    assert "To replay" not in text and "1 run(s): 1 pass" in text
