"""Fault-injecting proxies: TCP toxics and WebSocket-message-aware faults.

The object API is re-exported here; `cli.main(argv)` runs the HTTP server
(Toxiproxy-compatible, plus Tetherbed's endpoints). See README.md.
"""

from tetherbed.simulator.proxy.errors import AlreadyExists, BadRequest, NotFound, ProxyError
from tetherbed.simulator.proxy.partition import Partition
from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.proxy.registry import ProxyRegistry
from tetherbed.simulator.proxy.toxics import TOXIC_TYPES, Toxic
from tetherbed.simulator.proxy.ws.rules import MessageRule

__all__ = [
    "TOXIC_TYPES",
    "AlreadyExists",
    "BadRequest",
    "FaultProxy",
    "MessageRule",
    "NotFound",
    "Partition",
    "ProxyError",
    "ProxyRegistry",
    "Toxic",
]
