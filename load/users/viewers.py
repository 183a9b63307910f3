"""Viewers of the native adapter's loopback video listener: fast, slow, or stalled.

A viewer gets a ticket and the listener's URL from `tetherbed load video`,
presents the ticket, and reads CDV1/CDN1 frames (agent/native/video/frames.py).
A fast viewer acks each frame at once, a slow one after the plan's
`slow_ack_seconds`, a stalled one never. Each frame is reported, under the
viewer's own name (`frame (fast 2)`), with its
capture-to-viewer latency (the header's CLOCK_MONOTONIC capture time against
this machine's), and each keyframe again under its own name; a sequence gap
is reported as skipped frames, and when the frame after a gap is no keyframe
the viewer asks for one, as a browser panel would (the listener sends only
keyframes after a skip, so this stays at 0 unless it does not).
"""

from __future__ import annotations

import json
import time
import urllib.request

import gevent

from tetherbed.agent.native.video.frames import parse
from tetherbed.load.users import roles, slots
from tetherbed.load.users.websocket_link import Closed, Link

ACK, STALLED = "ack", "never"


class ViewerUser(roles.LoadUser):
    abstract = True
    #: fast, slow or stalled (the report's names).
    kind = "fast"

    def on_start(self) -> None:
        plan = self.plan
        #: This viewer's number among its kind (its frames are reported under it).
        self.number = slots.claim(self.environment, f"viewer {self.kind}") + 1
        started = time.perf_counter()
        with urllib.request.urlopen(plan.grant_url, timeout=30) as answer:
            grant = json.load(answer)
        self.link = Link.open(grant["url"], origin=grant["origin"])
        self.link.send(json.dumps({"ticket": grant["ticket"]}).encode())
        self.report("video", f"open ({self.kind})", time.perf_counter() - started, 0, None)
        self.last: tuple[int, int] | None = None

    def ack_delay(self) -> float | None:
        """Seconds before acking a frame; None: never ack."""
        return 0.0

    def watch(self) -> None:
        link = self.link
        delay = self.ack_delay()
        name = f"frame ({self.kind} {self.number})"
        while True:
            try:
                data = link.recv()
            except Closed as closed:
                self.report("video", name, 0.0, 0, closed)
                return
            received = time.monotonic()
            message = parse(data)
            self.report(
                "video", name, max(received - message.timestamp_us / 1e6, 0.0), len(data), None
            )
            if message.keyframe:
                self.report("video", f"keyframe ({self.kind})", 0.0, len(data), None)
            self._gaps(message.generation, message.sequence, message.keyframe)
            if delay is None:
                continue
            if delay > 0:
                gevent.sleep(delay)
            ack = {"type": "ack", "generation": message.generation, "sequence": message.sequence}
            link.send(json.dumps(ack, separators=(",", ":")).encode())

    def _gaps(self, generation: int, sequence: int, keyframe: bool) -> None:
        last = self.last
        self.last = (generation, sequence)
        if last is None or last[0] != generation or sequence <= last[1] + 1:
            return
        for _ in range(sequence - last[1] - 1):
            self.report("video", f"skipped ({self.kind})", 0.0, 0, None)
        if not keyframe:
            self.link.send(b'{"type":"keyframe"}')
            self.report("video", f"keyframe request ({self.kind})", 0.0, 0, None)

    def on_stop(self) -> None:
        link = getattr(self, "link", None)
        if link is not None:
            link.close()
