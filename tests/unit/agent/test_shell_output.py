"""The shared output budget, decoding, and trimming to the budget and the frame."""

from __future__ import annotations

import msgspec
import pytest

from tetherbed.agent.shell import TRUNCATION_MARKER, OutputCapture, fit_output

STDOUT, STDERR = 1, 2


def utf8_size(*texts: str) -> int:
    return sum(len(text.encode()) for text in texts)


def json_size(*texts: str) -> int:
    return sum(len(msgspec.json.encode(text)) - 2 for text in texts)


def test_capture_shares_one_budget_across_both_streams() -> None:
    capture = OutputCapture(10)
    capture.feed(STDOUT, b"123456")
    capture.feed(STDERR, b"abcdef")
    capture.feed(STDOUT, b"789")
    assert capture.text(STDOUT) == "123456"
    assert capture.text(STDERR) == "abcd"
    assert capture.truncated


def test_capture_within_budget_is_not_truncated() -> None:
    capture = OutputCapture(6)
    capture.feed(STDOUT, b"abc")
    capture.feed(STDERR, b"def")
    capture.feed(STDERR, b"")
    assert not capture.truncated
    assert (capture.text(STDOUT), capture.text(STDERR)) == ("abc", "def")


def test_invalid_utf8_is_replaced() -> None:
    capture = OutputCapture(100)
    capture.feed(STDOUT, b"ok \xff\xfe end \xc3")
    assert capture.text(STDOUT) == "ok \ufffd\ufffd end \ufffd"


def test_a_character_split_by_the_budget_is_dropped_not_replaced() -> None:
    capture = OutputCapture(5)
    capture.feed(STDOUT, "ééé".encode())  # 6 bytes; the budget cuts the third in half
    assert capture.text(STDOUT) == "éé"


def test_fit_leaves_output_within_both_budgets_alone() -> None:
    assert fit_output("out", "err", truncated=False, max_bytes=6, json_budget=6) == (
        "out",
        "err",
        False,
    )


def test_fit_appends_the_marker_inside_the_byte_budget() -> None:
    stdout, stderr, truncated = fit_output(
        "x" * 100, "warning", truncated=True, max_bytes=100, json_budget=10_000
    )
    assert truncated
    assert stderr == "warning\n" + TRUNCATION_MARKER
    assert utf8_size(stdout, stderr) <= 100
    assert stdout == "x" * (100 - len(stderr))


def test_fit_puts_no_blank_line_before_the_marker() -> None:
    _, stderr, _ = fit_output("", "line\n", truncated=True, max_bytes=1000, json_budget=1000)
    assert stderr == "line\n" + TRUNCATION_MARKER
    _, stderr, _ = fit_output("", "", truncated=True, max_bytes=1000, json_budget=1000)
    assert stderr == TRUNCATION_MARKER


def test_fit_trims_stdout_before_stderr() -> None:
    stdout, stderr, _ = fit_output(
        "o" * 50, "e" * 50, truncated=True, max_bytes=80, json_budget=1000
    )
    assert stderr.startswith("e" * 50)
    assert stdout == "o" * (80 - 50 - 1 - len(TRUNCATION_MARKER))
    stdout, stderr, _ = fit_output(
        "o" * 50, "e" * 50, truncated=True, max_bytes=40, json_budget=1000
    )
    assert stdout == ""
    assert stderr == "e" * (40 - 1 - len(TRUNCATION_MARKER)) + "\n" + TRUNCATION_MARKER


def test_replacement_characters_count_by_their_utf8_size() -> None:
    # 40 raw bytes that decode to 40 replacement characters of 3 bytes each.
    capture = OutputCapture(40)
    capture.feed(STDOUT, b"\xff" * 40)
    stdout, stderr, truncated = fit_output(
        capture.text(STDOUT), "", truncated=capture.truncated, max_bytes=40, json_budget=1000
    )
    assert truncated
    assert utf8_size(stdout, stderr) <= 40
    assert stderr.endswith(TRUNCATION_MARKER)


def test_fit_trims_to_the_json_budget_exactly() -> None:
    # Control characters cost six bytes in JSON; a quote costs two.
    stdout = '\x01"a' * 1000
    budget = 2000
    fitted, stderr, truncated = fit_output(
        stdout, "", truncated=False, max_bytes=10**9, json_budget=budget
    )
    assert truncated
    assert json_size(fitted, stderr) <= budget
    assert stdout.startswith(fitted)
    # Maximal: one more character of the original would no longer fit.
    assert json_size(stdout[: len(fitted) + 1], stderr) > budget


def test_json_trim_crosses_block_boundaries() -> None:
    stdout = "\x00" * 200_000 + "abc"
    fitted, stderr, _ = fit_output(stdout, "", truncated=False, max_bytes=10**9, json_budget=70_000)
    assert json_size(fitted, stderr) <= 70_000
    assert json_size(stdout[: len(fitted) + 1], stderr) > 70_000


@pytest.mark.parametrize("max_bytes", [0, 1, 10])
def test_a_budget_smaller_than_the_marker_is_still_respected(max_bytes: int) -> None:
    stdout, stderr, truncated = fit_output(
        "data", "err", truncated=True, max_bytes=max_bytes, json_budget=1000
    )
    assert truncated
    assert utf8_size(stdout, stderr) <= max_bytes
