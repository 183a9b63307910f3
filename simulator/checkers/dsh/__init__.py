"""The dsh-computers checkers: presence, streams, executions, chunks, keys, install URLs.

They judge the recording of SSE agents' links (`wiretap/dsh`) and the dsh
clients' legs, read spec constants from `wire/dsh`, and never import `hub/`
or `agent/`; `evidence.py` turns a history into streams, exchanges and calls.
"""
