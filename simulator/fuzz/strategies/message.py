"""What a generated message is, whatever the spec: its bytes, what it claims to be,
its id, and what was broken in it (`None` when valid).

`crossdesk.RequestLine` and `local_executor.Frame` are this with the spec's own name
for what a message is (a `method`, a `kind`), so that both record, replay and describe
themselves the same way.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self


class FuzzedMessage:
    """Shared behaviour of a generated message; a frozen dataclass names its fields.

    Subclasses declare `data`, the name field `NAME` says, `request_id`, `mutation`
    and `field`, in that order."""

    __slots__ = ()

    #: The spec's name for what a message is, and the field holding it ("method", "kind").
    NAME: ClassVar[str]

    data: bytes
    request_id: Any
    mutation: str | None
    field: str | None

    @property
    def valid(self) -> bool:
        return self.mutation is None

    def to_json(self) -> dict[str, Any]:
        return {
            "data": self.data.decode("utf-8", "surrogateescape"),
            self.NAME: getattr(self, self.NAME),
            "request_id": self.request_id,
            "mutation": self.mutation,
            "field": self.field,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Self:
        return cls(
            raw["data"].encode("utf-8", "surrogateescape"),  # type: ignore[call-arg]
            raw[cls.NAME],
            raw.get("request_id"),
            raw.get("mutation"),
            raw.get("field"),
        )

    def describe(self) -> str:
        what = self.mutation or "valid"
        where = f" ({self.field})" if self.field else ""
        name = getattr(self, self.NAME)
        return f"{name or '?'} id={self.request_id!r} {what}{where}, {len(self.data)} bytes"
