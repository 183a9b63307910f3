"""HTTP/1.1 in the fault proxy and the wire recorder, sans-I/O.

`parser.HttpParser` cuts one direction of a connection into messages (head,
body pieces, end) and says which input bytes make up each piece, so that a
stage can forward, hold or drop them exactly; `rules` are the faults that act
on whole requests and responses (drop one, replay one later); `session` is
the proxy's stage that applies them. The sim network runs the same stage
over its in-memory connections, so an HTTP fault means the same on every
backend.
"""
