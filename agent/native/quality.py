"""`--quality PRESET`: the live-video tier. The default is the spec's agent-mode tier,
the high-frame-rate preview at up to 1920 × 1080."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Quality:
    name: str
    max_width: int
    max_height: int
    fps: int
    crf: int


PRESETS = {
    "high": Quality("high", 1920, 1080, 30, 23),
    "balanced": Quality("balanced", 1280, 720, 30, 26),
    "low": Quality("low", 960, 540, 15, 30),
}
DEFAULT = "high"
