"""The adapter: one method handler per protocol method, over the sans-I/O cores.

It owns the session, the frame store and capture thread, the image worker, the
input runner, observations, the operation cache and (with `--video-ws`) the video
pipeline and listener. Handlers run concurrently on the owner loop; blocking work
(X connections, PNG, input) goes to threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.native import images
from tetherbed.agent.native.actions import plan
from tetherbed.agent.native.capture_loop import CaptureLoop
from tetherbed.agent.native.desktop_backend import CoreDesktop, DesktopBackend, check_keys
from tetherbed.agent.native.devices import lookup_device
from tetherbed.agent.native.doctor import hello_video_fields
from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.frames import MAX_FRAME_AGE_S, FrameStore, Picture
from tetherbed.agent.native.framing import MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES
from tetherbed.agent.native.image_worker import PREVIEW, SCREENSHOT, ImageWorker
from tetherbed.agent.native.input_runner import InputRunner, Progress
from tetherbed.agent.native.observations import ObservationStore
from tetherbed.agent.native.operations import MAX_OPERATIONS, OPERATION_TTL_S, OperationCache
from tetherbed.agent.native.planted_defects import plant, plant_in_listener
from tetherbed.agent.native.protocol import PROTOCOL, Request
from tetherbed.agent.native.quality import DEFAULT, PRESETS, Quality
from tetherbed.agent.native.session import Session
from tetherbed.agent.native.video.flow import OutFrame
from tetherbed.agent.native.video.frames import H264_PROTOCOL, NV12_PROTOCOL
from tetherbed.agent.native.video.listener import TRANSPORT, VideoListener
from tetherbed.agent.native.video.pipeline import VideoPipeline

log = logging.getLogger(__name__)
PASSWORD_WAIT_S = 5.0
TICKET_TTL_MS = 15000


@dataclass(frozen=True, slots=True)
class Options:
    video_ws: bool = False
    server: str | None = None
    port: int | None = None
    quality: str = DEFAULT
    registry: str | None = None
    #: Planted defects, for proving conformance cases catch them (planted_defects.py).
    defects: frozenset[str] = frozenset()


def hello_result(video_ws: bool) -> dict[str, Any]:
    """Exactly the spec's example, plus the video capabilities with `--video-ws`."""
    result: dict[str, Any] = {
        "protocol": PROTOCOL,
        "image_formats": ["image/png"],
        "action_completion": "submitted",
        "human_pause": True,
        "max_request_bytes": MAX_REQUEST_BYTES,
        "max_response_bytes": MAX_RESPONSE_BYTES,
        "operation_cache_entries": MAX_OPERATIONS,
        "operation_cache_ms": int(OPERATION_TTL_S * 1000),
    }
    if video_ws:
        result.update(hello_video_fields())  # what `doctor --json` advertises, unprefixed
    return result


class Adapter:
    def __init__(
        self,
        options: Options,
        *,
        password: Callable[[], Awaitable[str | None]],
        desktop: DesktopBackend | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options
        self.quality: Quality = PRESETS[options.quality]
        self._password = password
        self._desktop = desktop or CoreDesktop()
        self._clock = clock
        self.session = Session()
        self.store = FrameStore(clock)
        self.observations = ObservationStore()
        self.operations = OperationCache()
        self.images = ImageWorker()
        self.exit_requested = asyncio.Event()
        self._capture: Any = None
        self._capture_loop: CaptureLoop | None = None
        self._input: InputRunner | None = None
        self._displays: list[Any] = []
        self._frame_event = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._actions: dict[int, asyncio.Task[Any]] = {}
        self._cancel_codes: dict[int, Code] = {}
        self._transport_state = "none"
        self.pipeline: VideoPipeline | None = None
        self.listener: VideoListener | None = None
        self._listener_nv12 = False
        plant(self, options.defects)
        if options.video_ws:
            self._start_listener(nv12=False)

    # --- video plumbing --------------------------------------------------------

    def _start_listener(self, *, nv12: bool) -> None:
        protocol = NV12_PROTOCOL if nv12 else H264_PROTOCOL
        quality = self.quality
        listener_box: list[VideoListener] = []

        def sink(frame: OutFrame) -> None:
            listener_box[0].push(frame)

        self.pipeline = VideoPipeline(
            protocol=protocol,
            sink=sink,
            max_size=(quality.max_width, quality.max_height),
            fps=quality.fps,
            crf=quality.crf,
            latest=lambda: self.store.latest()[0],
        )
        pipeline = self.pipeline
        listener = VideoListener(
            nv12=nv12,
            request_keyframe=pipeline.request_keyframe,
            set_active=pipeline.set_active,
            clock=self._clock,
        )
        listener_box.append(listener)
        plant_in_listener(listener, self.options.defects)
        listener.start()
        self.listener = listener
        self._listener_nv12 = nv12

    def _video_busy(self) -> bool:
        return self.pipeline is not None and self.pipeline.active

    # --- dispatch ----------------------------------------------------------------

    async def handle(self, request: Request) -> Any:
        handler = getattr(self, f"_m_{request.method}")
        return await handler(request)

    def note_cancel(self, request_id: int, code: Code) -> None:
        self._cancel_codes[request_id] = code

    # --- hello / status ----------------------------------------------------------

    async def _m_hello(self, request: Request) -> Any:
        if request.args["protocol"] != PROTOCOL:
            raise NativeError(Code.UNSUPPORTED_PROTOCOL, f"this adapter speaks {PROTOCOL}")
        return hello_result(self.options.video_ws)

    async def _m_status(self, request: Request) -> Any:
        picture, age = self.store.latest()
        session = self.session
        video_output: dict[str, Any] = {
            "transport": None,
            "viewers": 0,
            "queued": 0,
            "queued_bytes": 0,
            "unacknowledged_bytes": 0,
            "dropped": 0,
        }
        if self.listener is not None:
            video_output = await self.listener.call(self.listener.status)
        return {
            "state": session.state,
            "transport_state": self._transport_state,
            "device": session.device,
            "mode": session.mode if session.attempted else None,
            "generation": session.generation,
            "geometry_epoch": self.store.geometry_epoch,
            "frame_id": picture.frame_id if picture else None,
            "frame_age_ms": int(age * 1000) if picture else None,
            "source_size": (
                {"width": picture.rect.width, "height": picture.rect.height} if picture else None
            ),
            "display_index": session.display_index if session.attempted else None,
            "control_allowed": session.control_allowed,
            "control_enabled": session.control_enabled,
            "human_paused": session.human_paused,
            "platform": sys.platform,
            "displays": [
                {
                    "index": m.index,
                    "x": m.left,
                    "y": m.top,
                    "width": m.width,
                    "height": m.height,
                    "primary": m.primary,
                }
                for m in self._displays
            ],
            "video": {
                "enabled": self.options.video_ws,
                "decode_path": session.decode_path,
                "decoder": session.decoder,
                "protocol": self.pipeline.protocol if self.pipeline else None,
            },
            "native_video_decoder": "software",
            "video_output": video_output,
            "server": {"host": self.options.server, "port": self.options.port, "reached": "local"},
            "quality": self.quality.name,
            "error": session.last_error,
        }

    # --- connect and session control ---------------------------------------------

    async def _m_connect(self, request: Request) -> Any:
        args = request.args
        session = self.session
        session.begin(
            device=args["device"],
            mode=args["mode"],
            display=args["display"],
            decode_path=args["decode_path"],
            decoder=args["decoder"],
        )
        self._transport_state = "connecting"
        try:
            await self._authenticate(args["device"])
            monitors = await self._open_display(args["device"])
            if args["display"] >= len(monitors):
                raise NativeError(
                    Code.DISPLAY_NOT_FOUND, f"the device has {len(monitors)} display(s)"
                )
        except NativeError as exc:
            session.fail(exc.code)
            self._transport_state = "failed"
            await self._close_desktop()
            raise
        self._transport_state = "connected"
        if self.listener is not None and args["decode_path"] == "minirtc":
            # The decode path is fixed per connection; no viewer can exist before it.
            self._stop_video()
            self._start_listener(nv12=True)
        self._start_generation(session.generation)
        if self.listener is not None:
            await self.listener.call(self.listener.new_generation, session.generation)
        assert self._capture is not None
        self._capture_loop = CaptureLoop(
            self._capture, self.store, fps=self.quality.fps, busy=self._video_busy
        )
        self.store.subscribe(self._on_picture_thread)
        if self.pipeline is not None:
            self.store.subscribe(self.pipeline.submit)
        self._capture_loop.select(args["display"], session.generation)
        self._capture_loop.start()
        return {
            "state": session.state,
            "generation": session.generation,
            "device": session.device,
            "mode": session.mode,
            "display": session.display_index,
        }

    async def _authenticate(self, device_id: str) -> None:
        try:
            password = await asyncio.wait_for(self._password(), PASSWORD_WAIT_S)
        except TimeoutError:
            password = None
        if not password:
            raise NativeError(Code.PASSWORD_UNAVAILABLE, "no password on the credential descriptor")
        device = await asyncio.to_thread(lookup_device, self.options.registry, device_id)
        if device is None:
            raise NativeError(Code.DEVICE_NOT_FOUND, "no such device in the registry")
        if not await asyncio.to_thread(device.check, password):
            raise NativeError(Code.AUTH_FAILED, "wrong password")
        self._display_name = device.display

    async def _open_display(self, device_id: str) -> list[Any]:
        name = self._display_name
        try:
            self._capture = await asyncio.to_thread(self._desktop.open_capture, name)
            self._displays = await asyncio.to_thread(self._capture.monitors)
            if self.session.mode == "control":
                driver = await asyncio.to_thread(self._desktop.open_input, name)
                self._input = InputRunner(driver)
        except NativeError:
            raise
        except Exception as exc:
            raise NativeError(
                Code.DEVICE_NOT_FOUND, f"device {device_id} is unreachable: {exc}", retryable=True
            ) from None
        return self._displays

    def _start_generation(self, generation: int) -> None:
        self.store.new_generation(generation)
        self.observations.invalidate()
        if self.pipeline is not None:
            self.pipeline.reset(generation)

    def _on_picture_thread(self, picture: Picture) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._on_picture, picture.generation)

    def _on_picture(self, generation: int) -> None:
        self.session.frame_arrived(generation)
        event, self._frame_event = self._frame_event, asyncio.Event()
        event.set()

    async def _m_control(self, request: Request) -> Any:
        self.session.set_control(request.args["enabled"])
        if not request.args["enabled"]:
            await self._interrupt_input(Code.CONTROL_DENIED)
        return self._control_state()

    async def _m_viewer_control(self, request: Request) -> Any:
        operation = request.args["operation"]
        if operation == "pause":
            self.session.pause()
            await self._interrupt_input(Code.HUMAN_PAUSED)
        elif operation == "resume":
            self.session.resume()
        else:
            await self._disconnect()
        return {**self._control_state(), "state": self.session.state}

    def _control_state(self) -> dict[str, Any]:
        session = self.session
        return {
            "control_allowed": session.control_allowed,
            "control_enabled": session.control_enabled,
            "human_paused": session.human_paused,
        }

    async def _m_display(self, request: Request) -> Any:
        session = self.session
        session.require_connected()
        index = request.args["index"]
        if index >= len(self._displays):
            raise NativeError(Code.DISPLAY_NOT_FOUND, f"the device has {len(self._displays)}")
        await self._interrupt_input(Code.OBSERVATION_STALE)
        generation = session.change_display(index)
        self._start_generation(generation)
        if self.listener is not None:
            await self.listener.call(self.listener.new_generation, generation)
        assert self._capture_loop is not None
        self._capture_loop.select(index, generation)
        return {"generation": generation, "display_index": index, "state": session.state}

    async def _m_disconnect(self, request: Request) -> Any:
        await self._disconnect()
        return {"state": self.session.state}

    async def _m_exit(self, request: Request) -> Any:
        await self._disconnect()
        self.exit_requested.set()
        return {"state": self.session.state}

    async def _disconnect(self) -> None:
        if not self.session.connected:
            return
        await self._interrupt_input(Code.NOT_CONNECTED)
        self.session.disconnect()
        self._transport_state = "closed"
        self.observations.invalidate()
        if self.listener is not None:
            await self.listener.call(self.listener.new_generation, self.session.generation + 1)
        await self._close_desktop()

    async def _close_desktop(self) -> None:
        if self._capture_loop is not None:
            await asyncio.to_thread(self._capture_loop.stop)
            self._capture_loop = None
        self.store.new_generation(-1)
        if self._input is not None:
            runner, self._input = self._input, None
            driver = runner._driver
            runner.close()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(driver.close)
        if self._capture is not None:
            capture, self._capture = self._capture, None
            with contextlib.suppress(Exception):
                await asyncio.to_thread(capture.close)

    async def _interrupt_input(self, code: Code) -> None:
        """Cancel running and queued input sequences and let go of held input."""
        tasks = list(self._actions.items())
        for request_id, task in tasks:
            self._cancel_codes.setdefault(request_id, code)
            task.cancel()
        for _, task in tasks:
            with contextlib.suppress(BaseException):
                await task
        if self._input is not None:
            with contextlib.suppress(Exception):
                await self._input.release()

    def _stop_video(self) -> None:
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        if self.pipeline is not None:
            self.store.unsubscribe(self.pipeline.submit)
            self.pipeline.stop()
            self.pipeline = None

    async def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            await self._disconnect()
        await asyncio.to_thread(self._stop_video)
        self.images.stop()

    # --- images ----------------------------------------------------------------

    async def _fresh_picture(
        self, after: int | None, generation: int | None, timeout_ms: int
    ) -> tuple[Picture | None, float, bool]:
        """(picture, age, newer): waits up to `timeout_ms` for a newer or fresher frame."""
        if generation is not None and generation > self.session.generation:
            raise NativeError(Code.INVALID_ARGUMENT, "`generation` is newer than the session's")
        deadline = self._clock() + timeout_ms / 1000
        while True:
            picture, age = self.store.latest()
            newer = picture is not None and (
                after is None or picture.generation != generation or picture.frame_id > after
            )
            if picture is not None and newer and age <= MAX_FRAME_AGE_S:
                return picture, age, True
            remaining = deadline - self._clock()
            if remaining <= 0:
                return picture, age, False
            self.store.demand(remaining + 0.5)
            if self._capture_loop is not None:
                self._capture_loop.kick()
            event = self._frame_event
            # asyncio.timeout, not wait_for: on 3.11 wait_for loses a cancel (the
            # `cancel` method) that lands as a frame sets the event.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, 0.1)):
                    await event.wait()

    def _require_current(self, picture: Picture) -> None:
        if (
            picture.generation != self.session.generation
            or picture.geometry_epoch != self.store.geometry_epoch
        ):
            raise NativeError(Code.FRAME_OBSOLETE, "the display changed while encoding")

    async def _m_screenshot(self, request: Request) -> Any:
        args = request.args
        self.session.require_connected()
        picture, age, _ = await self._fresh_picture(
            args["after_frame_id"], args["generation"], args["timeout_ms"]
        )
        if picture is None:
            raise NativeError(Code.NOT_READY, "no frame of the current display yet")
        if age > MAX_FRAME_AGE_S:
            raise NativeError(Code.FRAME_STALE, "the latest frame is older than two seconds")
        rect = images.region_rect(picture, args["region"])
        max_edge = args["max_edge"] or images.SCREENSHOT_MAX_EDGE
        encoded = await self.images.submit(
            SCREENSHOT,
            lambda: images.encode(
                picture, rect, max_edge=max_edge, max_bytes=images.SCREENSHOT_MAX_BYTES
            ),
        )
        self._require_current(picture)
        observation = self.observations.create(
            generation=picture.generation,
            geometry_epoch=picture.geometry_epoch,
            frame_id=picture.frame_id,
            source_rect=encoded.source_rect,
            image_width=encoded.width,
            image_height=encoded.height,
            now=self._clock(),
        )
        meta = images.metadata(
            picture, encoded, display_index=self.session.display_index, age_s=age
        )
        meta["observation_id"] = observation.id
        return images.image_result(encoded, meta)

    async def _m_preview(self, request: Request) -> Any:
        args = request.args
        self.session.require_connected()
        picture, age, newer = await self._fresh_picture(
            args["after_frame_id"], args["generation"], args["timeout_ms"]
        )
        if picture is None:
            raise NativeError(Code.NOT_READY, "no frame of the current display yet")
        if args["after_frame_id"] is not None and not newer:
            return {
                "unchanged": True,
                "frame_age_ms": int(age * 1000),
                "stale": age > MAX_FRAME_AGE_S,
                "generation": picture.generation,
                "frame_id": picture.frame_id,
            }
        if age > MAX_FRAME_AGE_S:
            raise NativeError(Code.FRAME_STALE, "the latest frame is older than two seconds")
        rect = picture.rect
        max_edge = args["max_edge"] or images.PREVIEW_DEFAULT_EDGE
        encoded = await self.images.submit(
            PREVIEW,
            lambda: images.encode(
                picture, rect, max_edge=max_edge, max_bytes=images.PREVIEW_MAX_BYTES
            ),
        )
        self._require_current(picture)
        meta = images.metadata(
            picture, encoded, display_index=self.session.display_index, age_s=age
        )
        return images.image_result(encoded, meta)

    # --- actions -----------------------------------------------------------------

    async def _m_action(self, request: Request) -> Any:
        args = request.args
        operation_id = args["operation_id"]
        now = self._clock()
        entry = self.operations.lookup(operation_id, request.raw_action, now)
        if entry is not None:
            if entry.result is not None:
                return entry.result
            return {
                "status": "in_progress",
                "operation_id": operation_id,
                "retryable": False,
                "side_effect_possible": True,
                "generation": self.session.generation,
            }
        session = self.session
        session.require_control()
        observation = self._observation(args["observation_id"])
        action = request.action
        assert action is not None
        steps = plan(action, observation.to_display)
        check_keys(action)
        entry = self.operations.start(operation_id, request.raw_action, now)
        progress = Progress()
        generation = session.generation
        self._actions[request.id] = asyncio.current_task()  # type: ignore[assignment]

        def admit() -> None:
            session.require_control()
            self._observation(args["observation_id"])

        try:
            assert self._input is not None
            await self._input.run(steps, progress, admit)
        except NativeError as exc:
            result = self._failed(operation_id, generation, progress, exc.code, exc.retryable)
        except asyncio.CancelledError:
            code = self._cancel_codes.pop(request.id, Code.CANCELLED)
            if code is Code.SHUTTING_DOWN:
                raise
            result = self._failed(operation_id, generation, progress, code, False)
        except Exception as exc:
            log.warning("input failed: %s", exc)
            result = self._failed(operation_id, generation, progress, Code.INPUT_FAILED, False)
        else:
            result = {
                "status": "submitted",
                "operation_id": operation_id,
                "retryable": False,
                "side_effect_possible": True,
                "generation": generation,
                "after_frame_id": self.store.last_frame_id(),
            }
        finally:
            self._actions.pop(request.id, None)
            self._cancel_codes.pop(request.id, None)
        if result["status"] == "failed_before_submit":
            self.operations.forget(entry)  # nothing was sent: the same id may run again
        else:
            self.operations.finish(entry, result)
        return result

    def _failed(
        self, operation_id: str, generation: int, progress: Progress, code: Code, retryable: bool
    ) -> dict[str, Any]:
        if progress.sent:
            return {
                "status": "outcome_unknown",
                "operation_id": operation_id,
                "code": str(code),
                "retryable": False,
                "side_effect_possible": True,
                "generation": generation,
                "after_frame_id": self.store.last_frame_id(),
            }
        return {
            "status": "failed_before_submit",
            "operation_id": operation_id,
            "code": str(code),
            "retryable": retryable or code is Code.CANCELLED,
            "side_effect_possible": False,
            "generation": generation,
        }

    def _observation(self, observation_id: str) -> Any:
        return self.observations.get(
            observation_id,
            generation=self.session.generation,
            geometry_epoch=self.store.geometry_epoch,
            now=self._clock(),
        )

    # --- video -------------------------------------------------------------------

    async def _m_video_open(self, request: Request) -> Any:
        if self.listener is None:
            raise NativeError(Code.VIDEO_DISABLED, "start the adapter with --video-ws")
        self.session.require_connected()
        listener = self.listener
        await listener.call(listener.grant, request.args, self._clock())
        return {
            "url": f"ws://127.0.0.1:{listener.port}/api/video",
            "transport": TRANSPORT,
            "protocol": self.pipeline.protocol if self.pipeline else None,
            "decoder": self.session.decoder,
            "expires_in_ms": TICKET_TTL_MS,
        }

    async def _m_video_revoke(self, request: Request) -> Any:
        if self.listener is None:
            raise NativeError(Code.VIDEO_DISABLED, "start the adapter with --video-ws")
        closed = await self.listener.call(self.listener.revoke, request.args["view"])
        return {"revoked": True, "sockets_closed": closed}

    # cancel is answered by the dispatcher, which owns the request tasks.
