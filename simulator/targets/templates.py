"""Command templates: `["my-shim", "--url", "{hub_url}", "{shell_flag}"]` filled in.

A template is a list of arguments (or one shell-style string, split like a
POSIX shell would). Placeholders are `{name}`; `{{` and `}}` are literal
braces. An argument that is exactly one placeholder whose value is empty is
dropped, so that an optional flag (`{shell_flag}`) leaves no empty argument
behind. Unknown placeholders are refused when the template is read, not when
a run is half done.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Iterable, Mapping, Sequence

from tetherbed.simulator.targets.errors import TargetError

_FORMATTER = string.Formatter()


def parse_command(raw: object, where: str) -> tuple[str, ...]:
    """A command from a target file or the command line, as its arguments."""
    if isinstance(raw, str):
        try:
            parts = shlex.split(raw)
        except ValueError as exc:
            raise TargetError(f"{where}: cannot split {raw!r}: {exc}") from None
    elif isinstance(raw, Sequence) and all(isinstance(p, str | int | float) for p in raw):
        parts = [str(p) for p in raw]
    else:
        raise TargetError(f"{where}: a command is a string or a list of strings, not {raw!r}")
    if not parts:
        raise TargetError(f"{where}: the command is empty")
    return tuple(parts)


def placeholders(parts: Iterable[str], where: str) -> set[str]:
    found: set[str] = set()
    for part in parts:
        try:
            for _, name, spec, conversion in _FORMATTER.parse(part):
                if name is None:
                    continue
                if not name.isidentifier() or spec or conversion:
                    raise TargetError(f"{where}: {{{name}}} in {part!r} is not a plain placeholder")
                found.add(name)
        except ValueError as exc:
            raise TargetError(f"{where}: {part!r}: {exc}") from None
    return found


def check_placeholders(parts: Iterable[str], known: Iterable[str], where: str) -> None:
    unknown = placeholders(parts, where) - set(known)
    if unknown:
        raise TargetError(
            f"{where}: unknown placeholder(s) {sorted(unknown)}; known: {sorted(known)}"
        )


def fill(parts: Iterable[str], values: Mapping[str, object]) -> list[str]:
    """The arguments with every placeholder replaced (checked beforehand)."""
    filled: list[str] = []
    for part in parts:
        names = [name for _, name, _, _ in _FORMATTER.parse(part) if name is not None]
        text = part.format_map({k: "" if v is None else str(v) for k, v in values.items()})
        if not text and len(names) == 1 and part.strip() == "{" + names[0] + "}":
            continue
        filled.append(text)
    return filled


def fill_one(part: str, values: Mapping[str, object]) -> str:
    """One text with its placeholders replaced (an environment value, a URL)."""
    return part.format_map({k: "" if v is None else str(v) for k, v in values.items()})
