"""The neutral wire recorder: what crossed each link, as history records.

Every backend has something between each agent and the hub — the in-memory
network on sim, the fault proxy on process and docker. The recorder sits
there and writes what crossed, in the history, as its own process per node
(`wire:laptop-a`): connections opened and closed (with code, reason and who
closed first), the upgrade and its answer, and every frame's type, id,
version, size and payload digest, with HELLO, HELLO_ACK, SESSION_REVOKED,
ERROR and STATUS payloads kept. Checkers judge from these records; what hub
and agent journals say is extra evidence only. The record format is in
`records.py`. (`stream.StreamTap`, the byte-stream reader the proxy uses, is
imported from its module: it builds on the proxy's frame parser.)
"""

from tetherbed.simulator.wiretap.digest import payload_digest
from tetherbed.simulator.wiretap.log import WireConnection, WireLog
from tetherbed.simulator.wiretap.records import WireRecord, WireSink, node_of, process_of

__all__ = [
    "WireConnection",
    "WireLog",
    "WireRecord",
    "WireSink",
    "node_of",
    "payload_digest",
    "process_of",
]
