"""`tetherbed native doctor --json`: the spec's `automation_video_*` fields, probed.

The JSON carries exactly the three fields the spec names, with the spec's values
on a host where capture, swscale and libx264 work; a protocol whose probe fails
is not advertised, and `hello` repeats the same values without the prefix.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.native.harness import NativeProcess
from tetherbed.agent.native import doctor
from tetherbed.agent.native.doctor import Check, capabilities_of

SPEC_FIELDS = {
    "automation_video_transport": "loopback-websocket/1",
    "automation_video_protocols": ["h264-annexb/1", "nv12/1"],
    "automation_video_decoders": ["auto", "software"],
}


def test_doctor_json_is_exactly_the_spec_fields() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tetherbed.cli", "native", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    fields = json.loads(lines[0])
    assert fields == SPEC_FIELDS
    assert list(fields) == list(SPEC_FIELDS)


def test_doctor_text_lists_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main([]) == doctor.EXIT_OK
    out = capsys.readouterr().out
    for name in ("capture", "nv12/1", "h264-annexb/1"):
        assert any(line.startswith("ok") and name in line for line in out.splitlines()), out
    assert 'automation_video_transport: "loopback-websocket/1"' in out


def checks(**failed: str) -> list[Check]:
    names = ("capture", "nv12/1", "h264-annexb/1")
    return [Check(n, n not in failed.values(), "probe") for n in names]


def test_a_failed_probe_is_not_advertised() -> None:
    assert capabilities_of(checks()) == SPEC_FIELDS
    no_h264 = capabilities_of(checks(a="h264-annexb/1"))
    assert no_h264["automation_video_protocols"] == ["nv12/1"]
    assert no_h264["automation_video_transport"] == "loopback-websocket/1"
    assert capabilities_of(checks(a="nv12/1")) == {}  # H.264 encodes the NV12 picture
    assert capabilities_of(checks(a="capture")) == {}


def test_doctor_json_reports_a_failing_encoder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> str:
        raise RuntimeError("no libx264 in this PyAV")

    monkeypatch.setattr(doctor, "_check_h264", broken)
    assert doctor.main(["--json"]) == doctor.EXIT_FAILED
    captured = capsys.readouterr()
    assert json.loads(captured.out)["automation_video_protocols"] == ["nv12/1"]
    assert "h264-annexb/1: RuntimeError: no libx264 in this PyAV" in captured.err


def test_video_ws_refuses_to_start_without_a_working_protocol(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tetherbed.agent.native.main import EXIT_USAGE, main

    monkeypatch.setattr(doctor, "video_capabilities", dict)
    assert main(["--stdio", "--video-ws"]) == EXIT_USAGE
    assert "no video protocol works here" in capsys.readouterr().err


@pytest.mark.xvfb
def test_doctor_checks_a_display_and_hello_repeats_its_fields(
    xvfb: object, start_native: Callable[..., NativeProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    assert doctor.main(["--json", "--display", xvfb.name]) == doctor.EXIT_OK  # type: ignore[attr-defined]
    fields = json.loads(capsys.readouterr().out)
    hello = start_native("--video-ws").result("hello", protocol="crossdesk-automation/1")
    unprefixed = {key.removeprefix("automation_"): value for key, value in fields.items()}
    assert {key: hello[key] for key in unprefixed} == unprefixed
    assert doctor.main(["--display", ":65000"]) == doctor.EXIT_FAILED
    assert "FAIL  display" in capsys.readouterr().out
