from __future__ import annotations

import json

import pytest

from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError, WireError
from tetherbed.wire.host import detect_platform, normalize_arch
from tetherbed.wire.version import ProtocolVersion, VersionMismatch, negotiate, same_major


@pytest.mark.parametrize(
    ("shim", "platform", "expected"),
    [("1.1", "1.1", "1.1"), ("1.0", "1.1", "1.0"), ("1.3", "1.1", "1.1"), ("2.7", "2.0", "2.0")],
)
def test_same_major_negotiates_the_lower_minor(shim: str, platform: str, expected: str) -> None:
    assert str(negotiate(shim, platform)) == expected


def test_different_major_is_a_mismatch_with_the_spec_reason() -> None:
    with pytest.raises(VersionMismatch) as caught:
        negotiate("2.0", "1.1")
    reason = caught.value.close_reason()
    assert len(reason.encode()) <= 123  # RFC 6455 close reason limit
    decoded = json.loads(reason)
    assert decoded["error"] == "PROTOCOL_VERSION_MISMATCH"
    assert decoded["shim_max"] == "2.0"
    assert decoded["platform_max"] == "1.1"
    assert decoded["hint"]


@pytest.mark.parametrize("bad", ["1", "1.1.1", "v1.1", "", "01.1", "1.-1", None, 11])
def test_malformed_versions_are_typed_errors(bad: object) -> None:
    with pytest.raises(WireError):
        ProtocolVersion.parse(bad)  # type: ignore[arg-type]


def test_frame_version_leniency() -> None:
    v = ProtocolVersion(1, 1)
    assert same_major("1.0", v)
    assert same_major("1.9", v)
    assert same_major(None, v)
    assert not same_major("2.1", v)


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("x86_64", "x86_64"),
        ("AMD64", "x86_64"),
        ("amd64", "x86_64"),
        ("arm64", "arm64"),
        ("aarch64", "arm64"),
        ("ARM64", "arm64"),
    ],
)
def test_arch_aliases(raw: str, normal: str) -> None:
    assert normalize_arch(raw) == normal


@pytest.mark.parametrize("raw", ["i386", "riscv64", "armv7l", "", "X86-64"])
def test_other_arches_are_unsupported(raw: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        normalize_arch(raw)
    assert caught.value.code == ErrorCode.UNSUPPORTED_ARCH


def test_platform_detection() -> None:
    assert detect_platform("darwin") == "darwin"
    assert detect_platform("win32") == "windows"
    assert detect_platform("linux", "Linux version 6.1.0 (debian)") == "linux"
    assert detect_platform("linux", "Linux version 5.15.90.1-microsoft-standard-WSL2") == "wsl2"
