"""The records of a dsh-computers link (process `wire:<agent>`, `leg: dsh`).

Every value has `conn` (`<agent>#<n>`, one per TCP connection in the order
they were opened) and `leg` (`dsh`). An exchange's records also have `n`,
the request's number on its connection (HTTP/1.1 answers requests in order).
Everything is seen from the agent's side of the recorder: a request is what
the agent sent, before any fault acted on it; a response or event is what
reached the agent.

| event | value | when |
|---|---|---|
| `connect` | | the agent opened a TCP connection toward the hub |
| `http_request` | `n`, `method`, `path`, `size`, `digest`, `body` | the agent sent a request |
| `http_response` | `n`, `method`, `path`, `status`, `size`, `digest`, `error`, `body` | answer |
| `sse_open` | `n`, `path`, `status` | the events GET was answered with a stream (200) |
| `sse_event` | `n`, `event`, `id`, `size`, `digest`, `data` | one event of that stream |
| `sse_end` | `n`, `how` | the stream is over (see below) |
| `unreachable` | | the recorder could not reach the hub |
| `end` | `how` (`closed`/`reset`) | the TCP connection is over |

A stream's `sse_end` says how: `ended` (the hub ended the response), or how
the connection ended under it (`closed`, `reset`). A request is recorded once
the agent has sent all of it; an answer once all of it reached the agent.

`path` is the request's path without its query (the join.sh key is a
credential). `size` counts body bytes (de-chunked); `digest` is
`wiretap.digest.payload_digest` of the body (canonical JSON when it is JSON).
`error` is the JSON body's `error` code of an answer over 399. `body` and
`data` keep only the fields `summary.py` names — never a key or token, only
their digests.
"""

from __future__ import annotations

from tetherbed.simulator.wiretap.records import CONNECT, END, UNREACHABLE

LEG = "dsh"

HTTP_REQUEST = "http_request"
HTTP_RESPONSE = "http_response"
SSE_OPEN = "sse_open"
SSE_EVENT = "sse_event"
SSE_END = "sse_end"

EVENTS = (CONNECT, HTTP_REQUEST, HTTP_RESPONSE, SSE_OPEN, SSE_EVENT, SSE_END, UNREACHABLE, END)

#: How an SSE stream ended: the hub ended the response itself.
ENDED = "ended"
