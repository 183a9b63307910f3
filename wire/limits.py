"""Numeric limits and defaults fixed by the local-executor spec."""

from __future__ import annotations

MiB = 1024 * 1024

#: Largest WebSocket message either side accepts (spec: "Frame limit").
FRAME_LIMIT_BYTES = 16 * MiB

#: HELLO_ACK defaults used when the platform omits a limit.
DEFAULT_MAX_CONCURRENT = 4
DEFAULT_MAX_FILE_SIZE_BYTES = 10 * MiB
DEFAULT_COMMAND_TIMEOUT_SECONDS = 30

#: Keepalive cadence (spec: "Platform sends PING every 30s ... PONG within 10s").
PING_INTERVAL_SECONDS = 30.0
PONG_TIMEOUT_SECONDS = 10.0

#: Unsolicited STATUS cadence (spec: STATUS_INTERVAL_SECONDS).
STATUS_INTERVAL_SECONDS = 30.0

#: Headroom kept below the frame limit for the envelope around a payload and
#: for JSON escaping (a control character costs six bytes as ``\u00XX``).
ENVELOPE_HEADROOM_BYTES = 64 * 1024

#: Worst-case JSON escaping factor of text retained in COMMAND_RESULT.
JSON_ESCAPE_FACTOR = 6

#: FILE_LIST default and hard cap on entries.
DEFAULT_LIST_MAX_ENTRIES = 1000
