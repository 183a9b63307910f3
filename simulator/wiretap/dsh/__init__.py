"""The wire recorder on a dsh-computers link: HTTP exchanges and SSE streams.

An SSE agent's link carries plain HTTP/1.1: its enroll, heartbeat, result and
chunk POSTs, and one long GET whose answer is the hub's event stream. The
recorder (in the sim network and in the fault proxy alike) writes what
crossed as the process `wire:<agent>`: each request and its answer (method,
path, status, sizes, body digests, and the few body fields checkers read),
each SSE event (name, id, size, digest, its identifying fields), and when
streams and connections open and end. Headers are never recorded: they carry
the agent's token. `records.py` documents the format; `stream.HttpStreamTap`
reads a byte stream; `log.DshWireLog` turns what it reads into records.
"""

from tetherbed.simulator.wiretap.dsh.log import DshWireConnection, DshWireLog
from tetherbed.simulator.wiretap.dsh.stream import HttpStreamTap

__all__ = ["DshWireConnection", "DshWireLog", "HttpStreamTap"]
