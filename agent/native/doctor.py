"""`tetherbed native doctor [--json] [--display :N]`: what this adapter can do on this host.

A caller (the MCP side, in the spec) runs `doctor --json` before it starts the
adapter, and refuses one that does not advertise the loopback video transport.
So the advertised capabilities are probed, never assumed: a picture goes through
the same converter and encoder the video thread uses, and a protocol whose probe
fails is not listed. `hello` repeats the same values without the `automation_`
prefix; both come from `video_capabilities()`.

`--json` prints one JSON object with exactly the spec's fields (none of them when
no video protocol works). Every check is printed without `--json`; with it, a
failed check goes to stderr. Exit status: 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.native.planted_defects import NATIVE_DEFECTS, doctor_fields
from tetherbed.wire import crossdesk
from tetherbed.wire.crossdesk import H264_PROTOCOL as H264
from tetherbed.wire.crossdesk import NV12_PROTOCOL as NV12

#: "auto" and "software" both name the one native (software) decode path.
VIDEO_DECODERS = crossdesk.VIDEO_DECODERS
PREFIX = crossdesk.DOCTOR_PREFIX
EXIT_OK = 0
EXIT_FAILED = 1
_PROBE_SIZE = 64  # pixels a side: small, even, and enough for libx264


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


def _probe_frame() -> Any:
    from tetherbed.agent.desktop.capture import Frame

    side = _PROBE_SIZE
    row = bytes(range(256)) * (side * 4 // 256)
    return Frame(row * side, side, side, 0, 0, 0.0)


def _check_nv12() -> str:
    """BGRA → NV12 with the video thread's converter; raises when it cannot."""
    from tetherbed.agent.desktop.encode import Nv12Converter, nv12_parts
    from tetherbed.agent.native.video.frames import nv12_size

    picture = Nv12Converter().convert(_probe_frame())
    size = sum(part.nbytes for part in nv12_parts(picture))
    if size != nv12_size(_PROBE_SIZE, _PROBE_SIZE):
        raise RuntimeError(f"swscale produced {size} NV12 bytes")
    import av

    return f"PyAV {av.__version__} swscale BGRA -> NV12 (limited-range BT.601)"


def _check_h264() -> str:
    """One forced IDR through libx264; it must carry SPS, PPS and an IDR slice."""
    from tetherbed.agent.desktop.encode import Nv12Converter
    from tetherbed.agent.native.video.encoder import H264Encoder
    from tetherbed.agent.native.video.frames import nal_unit_types

    encoder = H264Encoder(_PROBE_SIZE, _PROBE_SIZE)
    unit = encoder.encode(Nv12Converter().convert(_probe_frame()), keyframe=True)
    if unit is None or not unit.keyframe:
        raise RuntimeError("libx264 returned no keyframe for a forced IDR")
    types = set(nal_unit_types(b"".join(unit.packets)))
    if not {5, 7, 8} <= types:
        raise RuntimeError(f"the keyframe's NAL unit types are {sorted(types)}, not SPS+PPS+IDR")
    return "libx264 ultrafast/zerolatency, Annex B, IDR with SPS/PPS"


def _check_capture() -> str:
    import mss

    return f"mss {getattr(mss, '__version__', '?')}"


def _check_display(display: str) -> Callable[[], str]:
    def check() -> str:
        from tetherbed.agent.desktop.capture import ScreenCapture

        with ScreenCapture(display) as capture:
            monitors = capture.monitors()
            capture.grab(region=(monitors[0].left, monitors[0].top, 2, 2))
        sizes = ", ".join(f"{m.width}x{m.height}" for m in monitors)
        return f"{display}: {len(monitors)} monitor(s) {sizes}, capture works"

    return check


def _run(name: str, probe: Callable[[], str]) -> Check:
    try:
        return Check(name, True, probe())
    except Exception as exc:  # a doctor reports every failure, whatever it is
        return Check(name, False, f"{type(exc).__name__}: {exc}")


def run_checks(display: str | None = None) -> list[Check]:
    checks = [
        _run("capture", _check_capture),
        _run(NV12, _check_nv12),
        _run(H264, _check_h264),
    ]
    if display is not None:
        checks.append(_run("display", _check_display(display)))
    return checks


def capabilities_of(checks: Sequence[Check]) -> dict[str, Any]:
    """The spec's `automation_video_*` fields for these checks ({} when no video works)."""
    passed = {c.name for c in checks if c.ok}
    if "capture" not in passed:
        return {}
    # H.264 encodes the NV12 picture, so it needs the NV12 conversion too.
    protocols = [p for p in (H264, NV12) if p in passed and NV12 in passed]
    if not protocols:
        return {}
    return {
        crossdesk.DOCTOR_VIDEO_TRANSPORT: crossdesk.VIDEO_TRANSPORT,
        crossdesk.DOCTOR_VIDEO_PROTOCOLS: protocols,
        crossdesk.DOCTOR_VIDEO_DECODERS: list(VIDEO_DECODERS),
    }


@functools.cache
def video_capabilities() -> dict[str, Any]:
    """What `doctor --json` advertises on this host (probed once per process)."""
    return capabilities_of(run_checks())


def hello_video_fields() -> dict[str, Any]:
    """`hello` repeats the doctor's fields without the `automation_` prefix."""
    return {key.removeprefix(PREFIX): value for key, value in video_capabilities().items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tetherbed native doctor",
        description="Probe what the native adapter can do here (video capture and encoding).",
    )
    parser.add_argument("--json", action="store_true", help="print the spec's fields as JSON")
    parser.add_argument("--display", help="also check capture on this X display, :N")
    parser.add_argument(
        "--defect",
        action="append",
        default=[],
        choices=sorted(NATIVE_DEFECTS),
        help="enable a deliberate bug, to prove a conformance case catches it",
    )
    args = parser.parse_args(argv)
    checks = run_checks(args.display)
    fields = doctor_fields(capabilities_of(checks), frozenset(args.defect))
    if args.json:
        print(json.dumps(fields))
        for check in checks:
            if not check.ok:
                print(f"tetherbed native doctor: {check.name}: {check.detail}", file=sys.stderr)
    else:
        for check in checks:
            print(f"{'ok  ' if check.ok else 'FAIL'}  {check.name:<14} {check.detail}")
        if fields:
            for key, value in fields.items():
                print(f"{key}: {json.dumps(value)}")
        else:
            print("no video protocol works here: the adapter cannot offer --video-ws")
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILED
