"""The agent's machine-local secret, and the keys derived from it.

One random 32-byte key per agent state directory, readable only by its owner.
It signs the audit log's HMAC chain; other keys (the root-grant key) are
derived from it by label, so that one secret never serves two purposes
directly and rotating it invalidates every derived credential at once.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_FILE = "audit.key"
KEY_BYTES = 32

#: Labels of derived keys. A new purpose gets a new label, never a reused one.
AUDIT_CHAIN_LABEL = "tetherbed/audit-chain/v1"
ROOT_GRANT_LABEL = "tetherbed/root-grant/v1"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tetherbed-agent"


def load_or_create(state_dir: Path) -> bytes:
    """Read the key, creating it (mode 0600, atomically) on first use."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / KEY_FILE
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(KEY_BYTES)
        temp = state_dir / f".{KEY_FILE}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # fails if another process won the race
        except FileExistsError:
            key = path.read_bytes()
        finally:
            temp.unlink()
    if len(key) != KEY_BYTES:
        raise ValueError(f"{path} is not a {KEY_BYTES}-byte key")
    return key


def derive(key: bytes, label: str) -> bytes:
    """A purpose-specific key: HMAC-SHA256(key, label)."""
    return hmac.new(key, label.encode("utf-8"), hashlib.sha256).digest()
