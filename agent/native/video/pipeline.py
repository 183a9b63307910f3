"""The video thread: latest picture → NV12 → (H.264 | raw) → one shared message.

It holds a one-picture mailbox (a newer picture replaces one not yet taken), so
a slow encode never queues pictures up. It runs only while viewers exist; a
keyframe request re-encodes the last picture when the screen is still, because
on a still screen no new picture would ever come. Messages go to `sink`, the
listener's bounded handoff.

Per picture, the captured BGRA is copied once, into the converter's reused
AVFrame; swscale writes NV12 into a new AVFrame that libx264 encodes directly;
the packet (or, for `nv12/1`, the NV12 rows) is copied once more, into the
message, which already carries its WebSocket frame header and goes to every
viewer as it is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tetherbed.agent.desktop.encode import Nv12Converter, even_size, nv12_parts
from tetherbed.agent.native.frames import Picture
from tetherbed.agent.native.video import frames as video_frames
from tetherbed.agent.native.video.encoder import H264Encoder
from tetherbed.agent.native.video.flow import KeyframePacer, OutFrame

log = logging.getLogger(__name__)


class VideoPipeline:
    def __init__(
        self,
        *,
        protocol: str,  # H264_PROTOCOL | NV12_PROTOCOL
        sink: Callable[[OutFrame], None],
        max_size: tuple[int, int] = (1920, 1080),
        fps: int = 30,
        crf: int = 23,
        latest: Callable[[], Picture | None] = lambda: None,
    ) -> None:
        self.protocol = protocol
        self._nv12 = protocol == video_frames.NV12_PROTOCOL
        self._sink = sink
        self._latest = latest  # the store's newest picture, for a keyframe on a still screen
        self._last_frame_id = -1
        self._max_w, self._max_h = max_size
        self._fps, self._crf = fps, crf
        self._cond = threading.Condition()
        self._mailbox: Picture | None = None
        self._active = False
        self._stopped = False
        self.generation = 0
        self._sequence = 0
        self._pacer = KeyframePacer()
        self._encoder: H264Encoder | None = None
        self._converter = Nv12Converter()
        self._last_nv12: tuple[Any, int] | None = None  # NV12 av.VideoFrame, timestamp
        self._last_message: OutFrame | None = None
        self.encoded = 0
        self._thread = threading.Thread(target=self._run, name="native-video", daemon=True)
        self._thread.start()

    # --- called from other threads ----------------------------------------

    def submit(self, picture: Picture) -> None:
        with self._cond:
            if self._active and picture.generation == self.generation:
                self._mailbox = picture
                self._cond.notify()

    def set_active(self, active: bool) -> None:
        with self._cond:
            self._active = active
            if not active:
                self._mailbox = None
            self._cond.notify()

    @property
    def active(self) -> bool:
        return self._active

    def request_keyframe(self) -> None:
        with self._cond:
            self._pacer.request()
            self._cond.notify()

    def reset(self, generation: int) -> None:
        """A new display generation: new encoder, sequence from 1, nothing old re-sent."""
        with self._cond:
            self.generation = generation
            self._sequence = 0
            self._mailbox = None
            self._encoder = None
            self._last_nv12 = None
            self._last_message = None
            self._last_frame_id = -1
            self._pacer.request()
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    # --- the thread ---------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and not self._work_ready(time.monotonic()):
                    self._cond.wait(self._idle_wait(time.monotonic()))
                if self._stopped:
                    return
                picture, self._mailbox = self._mailbox, None
                generation = self.generation
                force = self._pacer.take(time.monotonic())
            if picture is None and not force:
                continue
            try:
                self._produce(picture, generation, force)
            except Exception:
                log.exception("video encoding failed")

    def _work_ready(self, now: float) -> bool:
        """A picture to encode, or a keyframe request whose interval is over (lock held)."""
        if not self._active:
            return False
        return self._mailbox is not None or self._pacer.due_in(now) == 0.0

    def _idle_wait(self, now: float) -> float:
        """Until a request waiting in its one-second interval is due; a picture wakes us sooner.

        Never a poll: a thread that slept here while a picture arrived would cap the
        frame rate (with a stalled viewer asking for IDRs, a request is nearly always
        waiting).
        """
        due = self._pacer.due_in(now) if self._active else None
        return 0.1 if due is None else min(0.1, due)

    def _produce(self, picture: Picture | None, generation: int, force: bool) -> None:
        if picture is None and force:
            latest = self._latest()
            if (
                latest is not None
                and latest.generation == generation
                and (latest.frame_id != self._last_frame_id or self._last_nv12 is None)
            ):
                picture = latest
        if picture is not None:
            self._last_frame_id = picture.frame_id
            frame = picture.frame
            width, height = even_size(*_fit(frame.width, frame.height, self._max_w, self._max_h))
            nv12 = self._converter.convert(frame, width, height)
            timestamp = int(picture.captured_at * 1_000_000)
            self._last_nv12 = (nv12, timestamp)
        elif self._last_nv12 is not None:
            nv12, timestamp = self._last_nv12
        else:
            return
        if self._nv12:
            message = self._package_nv12(generation, nv12, timestamp)
        else:
            message = self._package_h264(generation, nv12, timestamp, force)
        if message is None:
            return
        with self._cond:
            if generation != self.generation:
                return  # the display changed while this picture was encoded
        self._last_message = message
        self.encoded += 1
        self._sink(message)

    def _package_nv12(self, generation: int, nv12: Any, timestamp: int) -> OutFrame:
        self._sequence += 1
        return video_frames.nv12_frame(
            generation,
            self._sequence,
            timestamp,
            width=nv12.width,
            height=nv12.height,
            parts=nv12_parts(nv12),
        )

    def _package_h264(
        self, generation: int, nv12: Any, timestamp: int, force: bool
    ) -> OutFrame | None:
        encoder = self._encoder
        if encoder is None or (encoder.width, encoder.height) != (nv12.width, nv12.height):
            encoder = H264Encoder(nv12.width, nv12.height, fps=self._fps, crf=self._crf)
            self._encoder = encoder
            force = True
        unit = encoder.encode(nv12, keyframe=force)
        if unit is None:
            return None
        if unit.keyframe:
            with self._cond:
                self._pacer.produced_keyframe(time.monotonic())
        if unit.size > video_frames.MAX_ACCESS_UNIT:
            log.warning("dropping a %d-byte access unit (over 4 MiB)", unit.size)
            self.request_keyframe()
            return None
        self._sequence += 1
        return video_frames.h264_frame(
            generation, self._sequence, timestamp, unit.keyframe, unit.packets
        )


def _fit(width: int, height: int, max_w: int, max_h: int) -> tuple[int, int]:
    scale = min(1.0, max_w / width, max_h / height)
    return max(2, int(width * scale)), max(2, int(height * scale))
