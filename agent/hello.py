"""The HELLO an agent advertises: who it is and what it can do."""

from __future__ import annotations

import platform
import socket
import sys
import uuid
from pathlib import Path

from tetherbed.wire.host import detect_platform, normalize_arch
from tetherbed.wire.messages import Capability, HardwareDevice, Hello
from tetherbed.wire.version import CURRENT

_MACHINE_NAMESPACE = uuid.UUID("5b0f5a9e-4c55-4f0a-9d3e-7d3c0f6b2a11")


def default_machine_id() -> str:
    """`hostname-uuid`, stable across restarts of the same host.

    Stability matters: a restarted agent with the same machine id is a
    legitimate same-machine takeover, not a split-brain attempt.
    """
    host = socket.gethostname() or "host"
    try:
        seed = Path("/etc/machine-id").read_text().strip()
    except OSError:
        seed = host
    return f"{host}-{uuid.uuid5(_MACHINE_NAMESPACE, seed)}"


def local_platform() -> str:
    try:
        proc_version = Path("/proc/version").read_text()
    except OSError:
        proc_version = ""
    return detect_platform(sys.platform, proc_version)


def build_hello(
    *,
    machine_id: str,
    shim_version: str,
    capabilities: list[Capability],
    allowed_root: str | None,
    hardware_devices: list[HardwareDevice] | None = None,
    screen_resolution: list[int] | None = None,
    local_llm_models: list[str] | None = None,
    computer_use_features: list[str] | None = None,
    protocol_version: str = str(CURRENT),
) -> Hello:
    return Hello(
        shim_version=shim_version,
        protocol_version=protocol_version,
        machine_id=machine_id,
        platform=local_platform(),
        arch=normalize_arch(platform.machine()),
        screen_resolution=screen_resolution,
        capabilities=[str(c) for c in capabilities],
        allowed_root=allowed_root,
        local_llm_models=local_llm_models or [],
        hardware_devices=hardware_devices or [],
        # A list even without computer use: the spec's HELLO has no null here.
        computer_use_features=computer_use_features or [],
    )
