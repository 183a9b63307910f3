"""dsh_chunk_order: streamed output reaches the caller in `seq` order, once (§11.2).

Why: chunks are separate POSTs, so they reach the hub late, twice (a retried
POST) or out of order (two in flight, a proxy retrying one). "The host drops
out-of-order duplicates and reassembles": a hub that passes chunks on as
they arrive shows the user output twice or scrambled, though the final
result (authoritative) is right.

For each computer_exec whose output the hub streamed to its caller, every
streamed piece is followed back (by stream and digest) to the chunk it came
from, among the chunks the agent POSTed for that request. A piece whose chunk
was already passed on is a duplicate; a piece from a chunk with a lower `seq`
than one already passed on is out of order. A piece that matches no chunk
(a hub that re-cuts output) cannot be followed: undecided. No streamed
output is no evidence (unknown).
"""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.checkers.dsh.evidence import Exchange, data_of, read
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History

NAME = "dsh_chunk_order"


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    evidence = read(history)
    followed = 0
    for call in evidence.calls_of("computer_exec"):
        streamed = call.value.get("streamed")
        pieces = (
            [p for p in streamed if isinstance(p, dict) and p.get("size")]
            if isinstance(streamed, list)
            else []
        )
        if not pieces:
            continue
        dispatched = evidence.dispatched(call)
        request_id = data_of(dispatched[0][1]).get("requestId") if dispatched else None
        if not isinstance(request_id, str):
            findings.undecided(
                f"{call.invoke.req}: streamed output whose execution is not on the wire",
                (call.completion, "the answer"),
            )
            continue
        sources = _chunk_pieces(evidence.chunks_for(request_id))
        used: set[tuple[int, int]] = set()
        last_seq = -1
        for number, piece in enumerate(pieces):
            key = (piece.get("stream"), piece.get("digest"))
            candidates = [source for source in sources if source[2] == key]
            if not candidates:
                findings.undecided(
                    f"{call.invoke.req}: streamed piece {number} ({piece.get('size')} bytes of "
                    f"{piece.get('stream')}) matches no chunk of {request_id}",
                    (call.completion, "the answer"),
                )
                continue
            fresh = [c for c in candidates if (c[0], c[1]) not in used]
            followed += 1
            if not fresh:
                seq, _, _, exchange = candidates[0]
                findings.add(
                    f"{call.invoke.req}: the output of chunk seq {seq} of {request_id} was "
                    f"streamed to the caller again (piece {number})",
                    (exchange.request, "the chunk"),
                    (call.completion, "the streamed output"),
                )
                continue
            ahead = [c for c in fresh if c[0] >= last_seq]
            seq, index, _, exchange = (ahead or fresh)[0]
            used.add((seq, index))
            if seq < last_seq:
                findings.add(
                    f"{call.invoke.req}: chunk seq {seq} of {request_id} was streamed after "
                    f"seq {last_seq} (piece {number})",
                    (exchange.request, "the chunk"),
                    (call.completion, "the streamed output"),
                )
            last_seq = max(last_seq, seq)
    if not followed and not findings.count:
        return findings.verdict("", no_evidence="no output was streamed to a caller")
    return findings.verdict(f"{followed} streamed piece(s), each once and in seq order")


def _chunk_pieces(chunks: list[Exchange]) -> list[tuple[int, int, tuple[Any, Any], Exchange]]:
    """(seq, index within the chunk, (stream, digest), the chunk) for each piece
    of output the agent POSTed, each seq once (an agent's retry repeats it)."""
    pieces = []
    seen: set[int] = set()
    for exchange in chunks:
        body = exchange.body
        seq = body.get("seq")
        if not isinstance(seq, int) or seq in seen:
            continue
        seen.add(seq)
        parts: list[tuple[str, Any]] = []
        if body.get("type") in ("stdout", "stderr"):
            parts.append((body["type"], body.get("data")))
        else:
            parts += [("stdout", body.get("stdout")), ("stderr", body.get("stderr"))]
        for index, (stream, summary) in enumerate(parts):
            if isinstance(summary, dict) and summary.get("size"):
                pieces.append((seq, index, (stream, summary.get("digest")), exchange))
    return sorted(pieces, key=lambda p: (p[0], p[1]))
