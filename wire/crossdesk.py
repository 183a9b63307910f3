"""Constants of the CrossDesk native automation protocol, `crossdesk-automation/1`.

The numbers the spec states (request and response limits, the operation and
observation caches, video authorization, flow control and framing), for
whoever judges an adapter from what crosses its stdio and its video socket.
"""

from __future__ import annotations

import struct

PROTOCOL = "crossdesk-automation/1"

# --- the envelope ------------------------------------------------------------------------
MAX_REQUEST_BYTES = 64 * 1024
MAX_DEPTH = 32
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
#: The output queue: messages and bytes, and how long a blocked pipe is borne.
OUTPUT_QUEUE_MESSAGES = 64
OUTPUT_QUEUE_BYTES = 8 * 1024 * 1024
BLOCKED_PIPE_SECONDS = 10.0

# --- methods -----------------------------------------------------------------------------
DEVICE_DIGITS = 9
DISPLAY_INDEX_MAX = 63
SCREENSHOT_MAX_EDGE = (64, 2048)
PREVIEW_MAX_EDGE = (64, 960)
WAIT_TIMEOUT_MS = (0, 5000)
SCROLL_TICKS = (1, 10)
DRAG_POINTS = (2, 128)
DRAG_DURATION_MS = (100, 2000)
HOTKEY_KEYS = (2, 6)
TYPE_TEXT_MAX_BYTES = 16 * 1024
ACTION_STATUSES = ("submitted", "in_progress", "failed_before_submit", "outcome_unknown")

# --- images and observations -----------------------------------------------------------
OBSERVATION_PNG_MAX_BYTES = 2 * 1024 * 1024
PREVIEW_PNG_MAX_BYTES = 256 * 1024
OBSERVATION_TTL_SECONDS = 30.0
OBSERVATIONS_KEPT = 32
FRAME_MAX_AGE_SECONDS = 2.0
OPERATION_CACHE_ENTRIES = 128
OPERATION_CACHE_MS = 300_000

# --- live video --------------------------------------------------------------------------
VIDEO_TRANSPORT = "loopback-websocket/1"
#: The two video protocols, by the framing they name (`decode_path` browser and minirtc).
H264_PROTOCOL = "h264-annexb/1"
NV12_PROTOCOL = "nv12/1"
VIDEO_PROTOCOLS = (H264_PROTOCOL, NV12_PROTOCOL)
VIDEO_DECODERS = ("auto", "software")
#: `doctor --json` advertises the video capabilities under these fields; `hello`
#: repeats them without DOCTOR_PREFIX (`video_transport`, ...).
DOCTOR_PREFIX = "automation_"
HELLO_VIDEO_TRANSPORT = "video_transport"
HELLO_VIDEO_PROTOCOLS = "video_protocols"
HELLO_VIDEO_DECODERS = "video_decoders"
DOCTOR_VIDEO_TRANSPORT = DOCTOR_PREFIX + HELLO_VIDEO_TRANSPORT
DOCTOR_VIDEO_PROTOCOLS = DOCTOR_PREFIX + HELLO_VIDEO_PROTOCOLS
DOCTOR_VIDEO_DECODERS = DOCTOR_PREFIX + HELLO_VIDEO_DECODERS
VIDEO_PATH = "/api/video"
TICKET_TTL_MS = 15_000
TICKET_CHARACTERS = 32
FIRST_MESSAGE_SECONDS = 3.0
MAX_CANDIDATES = 16
MAX_VIEWERS = 8
MAX_CLIENT_MESSAGE_BYTES = 1024
UNACKED_FRAMES = 8
UNACKED_BYTES = 1024 * 1024
KEYFRAME_REQUEST_INTERVAL_SECONDS = 1.0
STALLED_VIEWER_SECONDS = 10.0
ACCESS_UNIT_MAX_BYTES = 4 * 1024 * 1024
NV12_MAX_SIDE = 8192
NV12_MAX_PIXELS = 16_777_216

#: Binary frames: magic, generation, sequence, timestamp (µs), flags; NV12 adds width, height.
MAGIC_H264 = 0x43445631  # "CDV1"
MAGIC_NV12 = 0x43444E31  # "CDN1"
HEADER = struct.Struct(">IIIQI")
NV12_SIZE = struct.Struct(">II")
FLAG_IDR = 1
