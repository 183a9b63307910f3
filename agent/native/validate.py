"""Strict field readers: every field is checked for type and range, unknown ones refused.

A `Fields` wraps one JSON object; reading a key marks it used, and `finish()` rejects
whatever was not read, which is how "unknown fields are rejected" stays true for
every method without a second list of allowed names.
"""

from __future__ import annotations

import math
from typing import Any

from tetherbed.agent.native.errors import Code, NativeError

_MISSING = object()


def _bad(path: str, why: str) -> NativeError:
    return NativeError(Code.INVALID_ARGUMENT, f"`{path}` {why}")


class Fields:
    """Typed access to one JSON object at `path` (for messages such as `action.x`)."""

    def __init__(self, obj: Any, path: str = "", *, lenient: bool = False) -> None:
        """`lenient` is the planted defect `accept_unknown_fields` (never in normal use)."""
        if not isinstance(obj, dict):
            raise _bad(path or "request", "must be an object")
        self._obj = obj
        self._path = path
        self._used: set[str] = set()
        self._lenient = lenient

    def _name(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def skip(self, *keys: str) -> None:
        self._used.update(keys)

    def raw(self, key: str) -> Any:
        self._used.add(key)
        return self._obj.get(key, _MISSING)

    def has(self, key: str) -> bool:
        return key in self._obj

    def int(
        self, key: str, lo: int, hi: int, *, default: Any = _MISSING, optional: bool = False
    ) -> Any:
        value = self.raw(key)
        if value is _MISSING or (value is None and optional):
            return self._absent(key, default, optional)
        if type(value) is not int:
            raise _bad(self._name(key), "must be an integer")
        if not lo <= value <= hi:
            raise _bad(self._name(key), f"must be between {lo} and {hi}")
        return value

    def number(self, key: str) -> float | int:
        value = self.raw(key)
        if value is _MISSING:
            raise _bad(self._name(key), "is required")
        if type(value) not in (int, float) or not math.isfinite(value):
            raise _bad(self._name(key), "must be a finite number")
        return value

    def bool(self, key: str) -> bool:
        value = self.raw(key)
        if value is _MISSING:
            raise _bad(self._name(key), "is required")
        if type(value) is not bool:
            raise _bad(self._name(key), "must be a boolean")
        return value

    def str(
        self,
        key: str,
        *,
        max_len: int = 1024,
        min_len: int = 1,
        default: Any = _MISSING,
        optional: bool = False,
    ) -> Any:
        value = self.raw(key)
        if value is _MISSING or (value is None and optional):
            return self._absent(key, default, optional)
        if not isinstance(value, str):
            raise _bad(self._name(key), "must be a string")
        if not min_len <= len(value) <= max_len:
            raise _bad(self._name(key), f"must be {min_len} to {max_len} characters")
        return value

    def choice(
        self, key: str, options: tuple[str, ...], *, default: Any = _MISSING, optional: bool = False
    ) -> Any:
        value = self.str(key, max_len=64, default=default, optional=optional)
        if value is default and not self.has(key):
            return value
        if value is None and optional:
            return None
        if value not in options:
            raise _bad(self._name(key), f"must be one of {', '.join(options)}")
        return value

    def list(self, key: str, lo: int, hi: int) -> list[Any]:
        value = self.raw(key)
        if value is _MISSING:
            raise _bad(self._name(key), "is required")
        if not isinstance(value, list):
            raise _bad(self._name(key), "must be an array")
        if not lo <= len(value) <= hi:
            raise _bad(self._name(key), f"must hold {lo} to {hi} items")
        return value

    def object(self, key: str, *, optional: bool = False) -> Fields | None:
        value = self.raw(key)
        if value is _MISSING or (value is None and optional):
            if optional:
                return None
            raise _bad(self._name(key), "is required")
        return Fields(value, self._name(key), lenient=self._lenient)

    def _absent(self, key: str, default: Any, optional: bool) -> Any:
        if default is not _MISSING:
            return default
        if optional:
            return None
        raise _bad(self._name(key), "is required")

    def finish(self) -> None:
        unknown = sorted(set(self._obj) - self._used)
        if unknown and not self._lenient:
            names = ", ".join(f"`{self._name(k)[:64]}`" for k in unknown[:8])
            raise NativeError(Code.UNKNOWN_FIELD, f"unknown field {names}")
