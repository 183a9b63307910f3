"""File operations overlap on the sim as they do on a real agent's worker threads.

A client writes a file and, without waiting for the ACK, reads it back. On a
real machine the two requests run in threads at the same time: the read may
open the file before the write's rename and return the old content, and its
answer may come first. A sim that ran each operation atomically, in arrival
order (`file_ops: serial`, the old behaviour), always answered the read with
the new content, so a client that assumes "sent first, applied first" passed
on sim and failed on a real machine. With overlapping operations the sim
shows the race, seeded: some seeds read the old content, the same seed
always the same.
"""

from __future__ import annotations

from pathlib import Path

from tetherbed.simulator.testbed import Testbed, topology


def write_then_read(workdir: Path, seed: int, file_ops: str) -> tuple[str, list[str]]:
    """The content the read returned, and the order the agent's answers crossed the wire."""
    options = {"file_ops": file_ops, "files": {"data.txt": "old"}}
    tb = Testbed(
        topology(
            agents={"laptop": {"machine": "m1", "session": "s1", "options": options}},
            clients={"alice": {"session": "s1"}},
        ),
        backend="sim",
        seed=seed,
        workdir=workdir / f"{file_ops}-{seed}",
    )
    try:
        tb.start("hub")
        tb.start("laptop")
        tb.expect(agent="laptop", state="connected")
        write = tb.send("alice", "FILE_WRITE", {"path": "data.txt", "content": "new"})
        read = tb.send("alice", "FILE_READ", {"path": "data.txt"})
        tb.expect(client="alice", id=write, outcome="ok", within=5)
        tb.expect(client="alice", id=read, outcome="ok", within=5)
        answered = tb.backend.recorder.find(
            lambda r: r.process == "client:alice" and r.req == read and r.type == "ok"
        )
        assert answered is not None
        order = [
            r.value["type"]
            for r in tb.history.records
            if r.process == "wire:laptop"
            and r.f == "frame"
            and r.value.get("dir") == "up"
            and r.value.get("type") in ("ACK", "FILE_CONTENTS")
        ]
        return answered.value["content"], order
    finally:
        tb.close()


SEEDS = range(1, 13)


def test_a_serial_sim_hides_the_race(tmp_path: Path) -> None:
    for seed in SEEDS[:3]:
        assert write_then_read(tmp_path, seed, "serial") == ("new", ["ACK", "FILE_CONTENTS"])


def test_overlapping_file_operations_show_it_seeded(tmp_path: Path) -> None:
    outcomes = {seed: write_then_read(tmp_path, seed, "overlapped") for seed in SEEDS}
    contents = {content for content, _ in outcomes.values()}
    assert contents <= {"old", "new"}  # a reader sees one file or the other, never a mix
    overtaken = [seed for seed, (content, order) in outcomes.items() if content == "old"]
    assert overtaken, outcomes  # the read opened the file before the write's rename
    assert any(order == ["FILE_CONTENTS", "ACK"] for _, order in outcomes.values())
    # A seed fixes the interleaving.
    seed = overtaken[0]
    assert write_then_read(tmp_path / "again", seed, "overlapped") == outcomes[seed]


def write_then_list(workdir: Path, seed: int, file_ops: str) -> list[str]:
    """The names a FILE_LIST sent right after a FILE_WRITE of a new file returned."""
    options = {"file_ops": file_ops, "files": {"old.txt": "o"}}
    tb = Testbed(
        topology(
            agents={"laptop": {"machine": "m1", "session": "s1", "options": options}},
            clients={"alice": {"session": "s1"}},
        ),
        backend="sim",
        seed=seed,
        workdir=workdir / f"list-{file_ops}-{seed}",
    )
    try:
        tb.start("hub")
        tb.start("laptop")
        tb.expect(agent="laptop", state="connected")
        write = tb.send("alice", "FILE_WRITE", {"path": "new.txt", "content": "n"})
        tb.wait(0.002)  # the list leaves while the write is (or was) at its fsync
        listing = tb.send("alice", "FILE_LIST", {"path": "."})
        tb.expect(client="alice", id=write, outcome="ok", within=5)
        tb.expect(client="alice", id=listing, outcome="ok", within=5)
        answered = tb.backend.recorder.find(
            lambda r: r.process == "client:alice" and r.req == listing and r.type == "ok"
        )
        assert answered is not None
        return list(answered.value["names"])
    finally:
        tb.close()


def test_a_listing_may_or_may_not_see_a_write_in_flight(tmp_path: Path) -> None:
    assert write_then_list(tmp_path, 1, "serial") == ["new.txt", "old.txt"]
    seen = {tuple(write_then_list(tmp_path, seed, "overlapped")) for seed in range(1, 17)}
    assert seen == {("old.txt",), ("new.txt", "old.txt")}
