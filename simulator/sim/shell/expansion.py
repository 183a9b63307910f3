"""Word expansion as `sh` does it: parameters, field splitting, quote removal.

Unquoted expansions are split on the default IFS (space, tab, newline); an
unquoted expansion that is empty yields no field, a quoted one an empty
field. Pathname expansion is not implemented, so an unquoted expansion whose
value holds a glob character is refused rather than passed on unexpanded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tetherbed.simulator.sim.shell.refusal import Refused
from tetherbed.simulator.sim.shell.syntax import Literal, Parameter, Word

#: The default IFS: what unquoted expansions are split on.
IFS = " \t\n"
_GLOB = frozenset("*?[")
_SEPARATORS = re.compile(r"[ \t\n]+")


def fields(words: list[Word], variables: Mapping[str, str], status: int) -> list[str]:
    """The fields the words expand to."""
    expanded: list[str] = []
    for word in words:
        expanded += _fields(word, variables, status)
    return expanded


def single(word: Word, variables: Mapping[str, str], status: int, *, split: bool) -> str:
    """One string: an assignment's value (`split=False`) or a redirection's file."""
    if not split:
        return "".join(_value(part, variables, status) for part in word.parts)
    found = _fields(word, variables, status)
    if len(found) != 1:
        raise Refused("a redirection to an ambiguous file name is not supported")
    return found[0]


def _value(part: Literal | Parameter, variables: Mapping[str, str], status: int) -> str:
    if isinstance(part, Literal):
        return part.text
    if part.name == "?":
        return str(status)
    value = variables.get(part.name)
    if value is None and part.tilde:
        raise Refused("'~' with HOME unset is not supported")
    return value or ""


def _fields(word: Word, variables: Mapping[str, str], status: int) -> list[str]:
    done: list[str] = []
    current: list[str] = []
    started = False  # whether `current` is a field yet ("" counts when quoted)
    for part in word.parts:
        value = _value(part, variables, status)
        if part.quoted or isinstance(part, Literal):
            if isinstance(part, Literal) and not part.quoted and _GLOB & set(value):
                raise Refused("globbing is not supported")
            current.append(value)
            started = started or part.quoted or bool(value)
            continue
        if not value:
            continue
        if _GLOB & set(value):
            raise Refused(f"globbing (an unquoted ${part.name} holding a pattern) is not supported")
        if value[0] in IFS and started:
            done.append("".join(current))
            current, started = [], False
        pieces = [piece for piece in _SEPARATORS.split(value) if piece]
        for at, piece in enumerate(pieces):
            current.append(piece)
            started = True
            if at < len(pieces) - 1:
                done.append("".join(current))
                current = []
        if value[-1] in IFS and started:
            done.append("".join(current))
            current, started = [], False
    if started:
        done.append("".join(current))
    return done
