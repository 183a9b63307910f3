"""Windows' reserved device names, which the spec answers PATH_RESERVED_NAME.

The spec reserves "CON/PRN/NUL/COM*/LPT*": the device names Windows keeps in
every folder. Read as Windows reads them (docs/spec-notes.md): CON, PRN, AUX,
NUL, COM1-COM9 and LPT1-LPT9 (and the superscript ¹²³ forms), in any case,
with or without an extension (`nul.txt` is the NUL device too), trailing
dots and spaces ignored. `COM*` is not every name that starts with COM:
`compose.yml` is an ordinary file on every OS.
"""

from __future__ import annotations

_DIGITS = "123456789\u00b9\u00b2\u00b3"
RESERVED = frozenset(
    {"CON", "PRN", "AUX", "NUL"} | {f"COM{d}" for d in _DIGITS} | {f"LPT{d}" for d in _DIGITS}
)


def is_reserved(name: str) -> bool:
    """Whether one path component names a Windows device."""
    stem = name.rstrip(" .").split(".", 1)[0].rstrip(" ")
    return stem.upper() in RESERVED
