"""The toxics one direction of one connection runs, in the order they were added.

Toxicity is drawn once per toxic and connection direction, when the toxic first
applies to it (the connection opens, or the toxic is added or updated), as
Toxiproxy does: with toxicity 0.3 about 30 % of connections are affected, and an
affected connection stays affected.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tetherbed.simulator.proxy.events import Event, Timed
from tetherbed.simulator.proxy.stages import Cancellable, Stage, build_stage
from tetherbed.simulator.proxy.toxics import Toxic

Sink = Callable[[float, Event], None]
CallAt = Callable[[float, Callable[[], None]], Cancellable]


@dataclass(eq=False)
class _Link:
    toxic: Toxic
    stage: Stage | None = None  # None: this connection drew "not affected"


class ToxicChain:
    def __init__(
        self,
        sink: Sink,
        *,
        rng: random.Random,
        call_at: CallAt,
        clock: Callable[[], float],
    ) -> None:
        self._sink = sink
        self._rng = rng
        self._call_at = call_at
        self._clock = clock
        self._links: list[_Link] = []

    def active(self) -> list[str]:
        """Names of the toxics that affect this connection direction."""
        return [link.toxic.name for link in self._links if link.stage is not None]

    def sync(self, toxics: Sequence[Toxic]) -> bool:
        """Follow the proxy's current toxics for this direction; True if anything changed.

        A toxic kept unchanged keeps its state (a half-used limit_data, a running
        timeout); a new or updated one starts fresh and draws its toxicity again.
        """
        kept: list[_Link] = []
        old = list(self._links)
        for toxic in toxics:
            link = next((link for link in old if link.toxic is toxic), None)
            if link is None:
                link = self._start(toxic)
            else:
                old.remove(link)
            kept.append(link)
        for link in old:
            if link.stage is not None:
                link.stage.close()
        changed = bool(old) or len(kept) != len(self._links)
        self._links = kept
        return changed

    def feed(self, event: Event, at: float) -> None:
        self._run(0, event, at)

    def close(self) -> None:
        for link in self._links:
            if link.stage is not None:
                link.stage.close()
        self._links = []

    def _start(self, toxic: Toxic) -> _Link:
        link = _Link(toxic)
        if toxic.toxicity >= 1.0 or self._rng.random() < toxic.toxicity:

            def later(when: float, event: Event) -> Cancellable:
                return self._call_at(when, lambda: self._resume(link, event, when))

            link.stage = build_stage(toxic, now=self._clock(), rng=self._rng, later=later)
        return link

    def _resume(self, link: _Link, event: Event, at: float) -> None:
        if link in self._links:
            self._run(self._links.index(link) + 1, event, at)

    def _run(self, start: int, event: Event, at: float) -> None:
        items: list[Timed] = [(at, event)]
        for link in self._links[start:]:
            if link.stage is None:
                continue
            stage = link.stage
            items = [out for when, item in items for out in stage.process(item, when)]
            if not items:
                return
        for when, item in items:
            self._sink(when, item)
