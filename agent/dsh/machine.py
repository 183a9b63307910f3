"""What the agent says about its machine (§3.1 `machine`, §11.6.1 metadata).

Names follow the spec's Node agent: `os` is Node's `os.platform()`
("darwin", "linux", "win32"), `arch` is Node's `os.arch()` ("x64", "arm64").
`nodeVersion` is left out: this agent runs on Python, and a Node version it
does not have would mislead.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tetherbed.agent.dsh.version import AGENT_VERSION
from tetherbed.wire.dsh import constants as C

_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64", "i686": "ia32"}


def node_platform() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    return sys.platform  # "darwin", "win32", ...


def node_arch() -> str:
    machine = platform.machine()
    return _ARCH.get(machine.lower(), machine.lower() or "unknown")


def hostname() -> str:
    return socket.gethostname() or "computer"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=2,
                check=False,
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def machine_block(name: str | None = None) -> dict[str, Any]:
    host = hostname()
    os_name = node_platform()
    return {
        "hostname": host,
        "name": name or host,
        "os": os_name,
        "arch": node_arch(),
        "platform": C.PLATFORM_LABELS.get(os_name, C.UNKNOWN_PLATFORM_LABEL),
        "cpuModel": cpu_model(),
        "memoryBytes": memory_bytes(),
    }


def metadata_block(capabilities: list[str], workspace_base: str) -> dict[str, Any]:
    """§11.6.1's handshake metadata."""
    return {
        "version": C.RECORD_VERSION,
        "agentVersion": AGENT_VERSION,
        "hostname": hostname(),
        "os": node_platform(),
        "arch": node_arch(),
        "capabilities": capabilities,
        "workspaceBase": workspace_base,
    }


def heartbeat_meta() -> dict[str, Any]:
    return {"cpuModel": cpu_model(), "memoryBytes": memory_bytes(), "agentVersion": AGENT_VERSION}
