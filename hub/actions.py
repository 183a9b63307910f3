"""What the hub's core asks its driver to do, per connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


# Not frozen: a frozen dataclass's __init__ goes through object.__setattr__,
# which costs measurably on the relay path (one Send per relayed frame).
@dataclass(slots=True)
class Send:
    peer: Any
    data: bytes


@dataclass(slots=True)
class Close:
    peer: Any
    code: int
    reason: str


HubAction = Send | Close
