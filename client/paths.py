"""Relative paths in the client: resolved against the session's allowed root.

Every spec example sends absolute paths, and a peer may resolve a relative
one against its own working directory (the public reference shim does, and
then refuses it as outside the root). So the client never sends one: a
relative path is joined to the `allowed_root` the session's agent announced
in its HELLO, which the hub reports (SESSION_INFO, docs/hub-api.md). Nothing
is normalised here: `..` and links are for the agent's jail to judge.
"""

from __future__ import annotations

import re

_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")
_WINDOWS_ROOT = re.compile(r"^(?:[A-Za-z]:|\\\\)")


def is_absolute(path: str) -> bool:
    """POSIX `/...`, a Windows drive path `C:\\...` or a UNC path `\\\\host\\...`."""
    return path.startswith("/") or bool(_WINDOWS_ABSOLUTE.match(path))


def join_root(root: str, path: str) -> str:
    """`path` as the agent should see it: unchanged when absolute, else under `root`."""
    if is_absolute(path):
        return path
    windows = bool(_WINDOWS_ROOT.match(root))
    separator = "\\" if windows else "/"
    if not path:
        return root
    return root.rstrip("/\\") + separator + path
