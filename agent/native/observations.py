"""Observations: the immutable screenshots that authorize input, and their coordinate map.

At most 32 are kept, each for 30 s, and a display generation or geometry change
invalidates them all. Ids name their generation (`obs_{generation}_{n}`), so a
lookup after eviction can still say *why* the id no longer works.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from tetherbed.agent.native.errors import Code, NativeError

MAX_OBSERVATIONS = 32
OBSERVATION_TTL_S = 30.0


@dataclass(frozen=True, slots=True)
class Rect:
    x: int
    y: int
    width: int
    height: int

    def to_wire(self) -> dict[str, int]:
        return {"x": self.x, "y": self.y, "width": self.width, "height": self.height}


@dataclass(frozen=True, slots=True)
class Observation:
    id: str
    generation: int
    geometry_epoch: int
    frame_id: int
    source_rect: Rect  # display-global pixels the image shows
    image_width: int
    image_height: int
    created_at: float

    def to_display(self, x: float, y: float) -> tuple[int, int]:
        """Image pixel → display-global pixel (pixel centres map to pixel centres)."""
        if not (0 <= x < self.image_width and 0 <= y < self.image_height):
            raise NativeError(
                Code.COORDINATE_OUT_OF_RANGE,
                f"({x}, {y}) is outside the {self.image_width}x{self.image_height} image",
            )
        rect = self.source_rect
        dx = min(rect.width - 1, math.floor((x + 0.5) * rect.width / self.image_width))
        dy = min(rect.height - 1, math.floor((y + 0.5) * rect.height / self.image_height))
        return rect.x + dx, rect.y + dy


class ObservationStore:
    def __init__(self) -> None:
        self._entries: OrderedDict[str, Observation] = OrderedDict()
        self._counter = 0

    def __len__(self) -> int:
        return len(self._entries)

    def create(
        self,
        *,
        generation: int,
        geometry_epoch: int,
        frame_id: int,
        source_rect: Rect,
        image_width: int,
        image_height: int,
        now: float,
    ) -> Observation:
        self._expire(now)
        self._counter += 1
        observation = Observation(
            f"obs_{generation}_{self._counter}",
            generation,
            geometry_epoch,
            frame_id,
            source_rect,
            image_width,
            image_height,
            now,
        )
        self._entries[observation.id] = observation
        while len(self._entries) > MAX_OBSERVATIONS:
            self._entries.popitem(last=False)
        return observation

    def get(
        self, observation_id: str, *, generation: int, geometry_epoch: int, now: float
    ) -> Observation:
        """The observation, or a typed error: stale (generation/geometry), expired, unknown."""
        self._expire(now)
        observation = self._entries.get(observation_id)
        if observation is None:
            parts = observation_id.split("_")
            if len(parts) == 3 and parts[0] == "obs" and parts[1].isdigit() and parts[2].isdigit():
                if int(parts[1]) != generation:
                    raise NativeError(
                        Code.OBSERVATION_STALE, "the display generation changed; take a screenshot"
                    )
                if int(parts[2]) <= self._counter:
                    raise NativeError(
                        Code.OBSERVATION_EXPIRED, "the observation expired or was evicted"
                    )
            raise NativeError(Code.OBSERVATION_NOT_FOUND, "no such observation")
        if observation.generation != generation or observation.geometry_epoch != geometry_epoch:
            raise NativeError(
                Code.OBSERVATION_STALE, "the display or its geometry changed; take a screenshot"
            )
        return observation

    def invalidate(self) -> None:
        self._entries.clear()

    def _expire(self, now: float) -> None:
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if now - oldest.created_at < OBSERVATION_TTL_S:
                break
            self._entries.popitem(last=False)
