"""Chunk reassembly (§11.2) under any arrival order, with duplicates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tetherbed.hub.dsh.chunks import Chunk, ChunkAssembler, Verdict


@st.composite
def arrivals(draw: st.DrawFn) -> tuple[int, list[int]]:
    """n chunks, each sent 1-3 times (retried POSTs), in any order."""
    n = draw(st.integers(min_value=0, max_value=40))
    sends = [seq for seq in range(n) for _ in range(draw(st.integers(1, 3)))]
    return n, draw(st.permutations(sends))


@given(arrivals())
def test_every_chunk_comes_out_once_and_in_order(case: tuple[int, list[int]]) -> None:
    n, order = case
    assembler = ChunkAssembler(max_buffered=64)
    out: list[int] = []
    for seq in order:
        verdict, ready = assembler.add(Chunk(seq, stdout=bytes([seq])))
        assert verdict is not Verdict.REFUSED
        out += [c.seq for c in ready]
    assert out == list(range(n))
    assert assembler.duplicates == len(order) - n
    assert assembler.held == 0 and assembler.gaps() == []


def test_a_bounded_window_ahead_of_a_gap() -> None:
    assembler = ChunkAssembler(max_buffered=2)
    assert assembler.add(Chunk(1))[0] is Verdict.HELD
    assert assembler.add(Chunk(2))[0] is Verdict.HELD
    assert assembler.add(Chunk(3))[0] is Verdict.REFUSED  # too far ahead, not kept
    assert assembler.gaps() == [0]
    verdict, ready = assembler.add(Chunk(0))
    assert verdict is Verdict.ACCEPTED and [c.seq for c in ready] == [0, 1, 2]
    assert assembler.add(Chunk(3))[0] is Verdict.ACCEPTED


def test_the_planted_defect_passes_chunks_as_they_come() -> None:
    assembler = ChunkAssembler(in_arrival_order=True)
    got = [c.seq for seq in (2, 0, 0, 1) for c in assembler.add(Chunk(seq))[1]]
    assert got == [2, 0, 0, 1]
