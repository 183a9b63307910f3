"""`--quality PRESET`: the live-video tier.

The default is the spec's agent-mode tier, "the high-frame-rate preview tier at up
to 1920 × 1080": 60 frames a second requested. What a viewer gets is bounded by
the display's changes, the encoder and its flow control, never above this. The
other presets trade rate and size for CPU and bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Quality:
    name: str
    max_width: int
    max_height: int
    fps: int
    crf: int


HIGH_FRAME_RATE = "high-frame-rate"
PRESETS = {
    HIGH_FRAME_RATE: Quality(HIGH_FRAME_RATE, 1920, 1080, 60, 23),
    "high": Quality("high", 1920, 1080, 30, 23),
    "balanced": Quality("balanced", 1280, 720, 30, 26),
    "low": Quality("low", 960, 540, 15, 30),
}
DEFAULT = HIGH_FRAME_RATE
