"""The test bed's device registry: 9-digit device ids for local X displays.

A CrossDesk device is a remote machine reached through a rendezvous server. In the
test bed a device is an X display on this host, registered in a JSON file:

    {"version": 1, "devices": {"123456789": {"display": ":7", "salt": "<hex>",
                                             "hash": "<hex>", "kdf": "scrypt"}}}

The file lives at `$TETHERBED_DEVICE_REGISTRY`, else `~/.config/tetherbed/devices.json`.
Passwords are six characters and stored only as salted scrypt hashes. Writes hold an
exclusive lock and replace the file atomically (temp file + rename).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REGISTRY_ENV = "TETHERBED_DEVICE_REGISTRY"
PASSWORD_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o, 1/l: read aloud safely
PASSWORD_LENGTH = 6
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


@dataclass(frozen=True, slots=True)
class Device:
    device_id: str
    display: str
    salt: bytes
    digest: bytes

    def check(self, password: str) -> bool:
        candidate = _hash(password, self.salt)
        return hmac.compare_digest(candidate, self.digest)


def default_registry_path() -> Path:
    override = os.environ.get(REGISTRY_ENV)
    if override:
        return Path(override)
    return Path.home() / ".config" / "tetherbed" / "devices.json"


def _hash(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, **_SCRYPT)


def _read(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    devices = data.get("devices", {}) if isinstance(data, dict) else {}
    return devices if isinstance(devices, dict) else {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write(path: Path, devices: dict[str, dict[str, str]]) -> None:
    fd, temp = tempfile.mkstemp(prefix=".devices-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"version": 1, "devices": devices}, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def register_device(registry_path: str | os.PathLike[str] | None, display: str) -> tuple[str, str]:
    """Register `display` under a new device id; returns (device_id, password)."""
    path = Path(registry_path) if registry_path is not None else default_registry_path()
    password = "".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(PASSWORD_LENGTH))
    salt = secrets.token_bytes(16)
    with _locked(path):
        devices = _read(path)
        while True:
            device_id = str(secrets.randbelow(900_000_000) + 100_000_000)
            if device_id not in devices:
                break
        devices[device_id] = {
            "display": display,
            "kdf": "scrypt",
            "salt": salt.hex(),
            "hash": _hash(password, salt).hex(),
        }
        _write(path, devices)
    return device_id, password


def lookup_device(registry_path: str | os.PathLike[str] | None, device_id: str) -> Device | None:
    path = Path(registry_path) if registry_path is not None else default_registry_path()
    entry = _read(path).get(device_id)
    if not isinstance(entry, dict) or entry.get("kdf") != "scrypt":
        return None
    try:
        return Device(
            device_id,
            str(entry["display"]),
            bytes.fromhex(entry["salt"]),
            bytes.fromhex(entry["hash"]),
        )
    except (KeyError, ValueError):
        return None
