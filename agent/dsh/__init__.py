"""Tetherbed's machine agent for the dsh-computers protocol (SSE in, HTTP POSTs out).

`core.AgentCore` holds every protocol rule (the stream's life and its
reconnect backoff, exec with capped and streamed output, cancel, file
operations, heartbeats, retried POSTs) without I/O; `runner` drives it with
asyncio, real processes and the file system; `cli` is `tetherbed agent
--transport sse` and the standalone `agent.pyz` that join.sh installs.

Standard library only (see `bundle.py`): a machine needs nothing but Python.
"""
