"""The dsh-computers protocol (npm package dsh-computers 1.3.0, PROTOCOL.md v1 + §10-§11).

Constants, the SSE framing, the message shapes and the reconnect bounds: the one
source that the hub (`hub/dsh`), the agent (`agent/dsh`) and the checkers read.

Standard library only. The agent is also shipped as a standalone zipapp that a
machine runs with nothing but `python3` (the spec's agent is likewise a
zero-dependency file), and it imports this package, so nothing here may import
msgspec, aiohttp or any other part of Tetherbed.
"""
