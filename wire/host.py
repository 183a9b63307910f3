"""HELLO `platform` and `arch` normalisation (spec: HELLO.platform / HELLO.arch enums)."""

from __future__ import annotations

from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError

PLATFORMS = ("darwin", "linux", "windows", "wsl2")
ARCHES = ("x86_64", "arm64")

#: Exactly the aliases the spec lists; anything else is UNSUPPORTED_ARCH.
_ARCH_ALIASES = {
    "x86_64": "x86_64",
    "AMD64": "x86_64",
    "amd64": "x86_64",
    "arm64": "arm64",
    "aarch64": "arm64",
    "ARM64": "arm64",
}


def normalize_arch(machine: str) -> str:
    """Map `platform.machine()` spellings to the spec's names, or UNSUPPORTED_ARCH."""
    try:
        return _ARCH_ALIASES[machine]
    except (KeyError, TypeError):
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_ARCH, f"architecture {machine!r} is not x86_64 or arm64"
        ) from None


def detect_platform(sys_platform: str, proc_version: str = "") -> str:
    """The spec's platform name from `sys.platform` and the text of /proc/version."""
    if sys_platform == "darwin":
        return "darwin"
    if sys_platform == "win32":
        return "windows"
    if sys_platform.startswith("linux"):
        return "wsl2" if "microsoft" in proc_version.lower() else "linux"
    return sys_platform
