"""What the hub's core asks its driver to do, per connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Send:
    peer: Any
    data: bytes


@dataclass(frozen=True, slots=True)
class Close:
    peer: Any
    code: int
    reason: str


HubAction = Send | Close
