"""no_crossed_answers: answers reach their own client, reads return their own path."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.checkers import crossed_answers as no_crossed_answers
from tetherbed.simulator.history import History


class Client:
    """Records one client's operations on one session."""

    def __init__(self, h: History, name: str, session: str) -> None:
        self.h, self.process, self.session, self.n = h, f"client:{name}", session, 0

    def invoke(self, t: float, kind: str, **payload: object) -> tuple[str, int]:
        self.n += 1
        req = f"{self.process}-{self.n}"
        value = {"payload": payload, "digest": f"{req}-d"}
        record = self.h.append(
            t, self.process, "invoke", kind, value, session=self.session, req=req
        )
        return req, record.index

    def complete(self, t: float, req: str, kind: str, outcome: str = "ok", **value: object) -> int:
        record = self.h.append(t, self.process, outcome, kind, value, session=self.session, req=req)
        return record.index

    def write(self, t: float, path: str, content: str, outcome: str = "ok") -> None:
        req, _ = self.invoke(t, "FILE_WRITE", path=path, content=content)
        self.complete(t + 0.1, req, "FILE_WRITE", outcome, type="ACK")

    def read(self, t: float, path: str, content: str, **extra: object) -> tuple[int, int]:
        req, invoked = self.invoke(t, "FILE_READ", path=path)
        done = self.complete(
            t + 0.1, req, "FILE_READ", type="FILE_CONTENTS", content=content, **extra
        )
        return invoked, done


def test_reads_of_own_writes_pass() -> None:
    h = History()
    alice = Client(h, "alice", "s1")
    alice.write(1, "notes.txt", "hello")
    alice.read(2, "notes.txt", "hello")
    alice.read(3, "./notes.txt", "hel", truncated=True)
    verdict = no_crossed_answers.check(h)
    assert verdict.ok, verdict.summary
    assert "2 read(s)" in verdict.summary


def test_a_read_returning_the_other_clients_file_is_a_crossing() -> None:
    h = History()
    alice, bob = Client(h, "alice", "s1"), Client(h, "bob", "s2")
    alice.write(1, "a.txt", "alice's secret")
    bob.write(1, "b.txt", "bob's notes")
    _, bob_write = bob.invoke(1.5, "FILE_WRITE", path="b.txt", content="bob v2")
    invoked, leaked = alice.read(2, "a.txt", "bob v2")
    verdict = no_crossed_answers.check(h)
    assert not verdict.ok
    assert {invoked, leaked, bob_write} <= set(verdict.evidence_indexes())
    assert "b.txt" in verdict.summary and "client:bob" in verdict.summary


def test_initial_files_make_unknown_content_a_violation() -> None:
    h = History()
    alice = Client(h, "alice", "s1")
    alice.read(1, "seed.txt", "from the scenario")
    alice.read(2, "other.txt", "garbage")
    assert no_crossed_answers.check(h).ok  # initial content unknown: cannot tell
    verdict = no_crossed_answers.check(h, initial_files={"seed.txt": "from the scenario"})
    assert not verdict.ok and "other.txt" in verdict.summary
    per_session = {"s1": {"seed.txt": "from the scenario", "other.txt": "garbage"}}
    assert no_crossed_answers.check(h, initial_files=per_session).ok


def test_a_write_in_flight_or_failed_may_already_be_visible() -> None:
    h = History()
    alice = Client(h, "alice", "s1")
    alice.write(1, "a.txt", "v1", outcome="fail")
    req, _ = alice.invoke(2, "FILE_WRITE", path="a.txt", content="v2")
    alice.read(2.5, "a.txt", "v2")
    alice.read(3, "a.txt", "v1")
    alice.complete(4, req, "FILE_WRITE", type="ACK")
    assert no_crossed_answers.check(h, initial_files={}).ok


def test_content_written_only_after_the_read_completed_is_not_allowed() -> None:
    h = History()
    alice = Client(h, "alice", "s1")
    alice.read(1, "a.txt", "future")
    alice.write(5, "a.txt", "future")
    assert not no_crossed_answers.check(h, initial_files={}).ok


def test_base64_writes_match_utf8_reads() -> None:
    h = History()
    alice = Client(h, "alice", "s1")
    req, _ = alice.invoke(1, "FILE_WRITE", path="a.bin", content="aGVsbG8=", encoding="base64")
    alice.complete(1.1, req, "FILE_WRITE", type="ACK")
    alice.read(2, "a.bin", "hello")
    assert no_crossed_answers.check(h, initial_files={}).ok


def test_a_move_or_a_command_naming_the_file_makes_it_unknown() -> None:
    h = History()
    alice = Client(h, "alice", "s1")
    req, _ = alice.invoke(1, "EXECUTE_COMMAND", command="echo hi > a.txt")
    alice.complete(1.1, req, "EXECUTE_COMMAND", type="COMMAND_RESULT", exit_code=0)
    req, _ = alice.invoke(1, "FILE_MOVE", src="x.txt", dst="b.txt")
    alice.complete(1.1, req, "FILE_MOVE", type="ACK")
    alice.read(2, "a.txt", "hi\n")
    alice.read(2, "b.txt", "whatever x held")
    assert no_crossed_answers.check(h, initial_files={}).ok


def test_an_answer_delivered_to_another_client_is_named() -> None:
    h = History()
    alice, bob = Client(h, "alice", "s1"), Client(h, "bob", "s2")
    _, asked = alice.invoke(1, "FILE_READ", path="a.txt")
    wrong = h.append(
        2,
        "client:bob",
        "ok",
        "FILE_READ",
        {"type": "FILE_CONTENTS"},
        session="s2",
        req="client:alice-1",
    ).index
    bob.complete(3, "nobody-7", "FILE_READ", type="FILE_CONTENTS")
    verdict = no_crossed_answers.check(h)
    assert not verdict.ok
    assert {asked, wrong} <= set(verdict.evidence_indexes())
    assert "received the answer to client:alice" in verdict.summary
    assert "no client invoked" in verdict.summary


def test_an_answer_of_the_wrong_kind_is_a_crossing() -> None:
    h = History()
    alice = Client(h, "alice", "s1")
    req, _ = alice.invoke(1, "FILE_READ", path="a.txt")
    wrong = alice.complete(2, req, "FILE_READ", type="COMMAND_RESULT", exit_code=0)
    verdict = no_crossed_answers.check(h)
    assert not verdict.ok and wrong in verdict.evidence_indexes()


@st.composite
def honest_files(draw: st.DrawFn) -> History:
    """Two clients, each on its own session, against a real dict of files."""
    h = History()
    clients = [Client(h, "alice", "s1"), Client(h, "bob", "s2")]
    files: dict[tuple[str, str], str] = {}
    t = 0.0
    for _ in range(draw(st.integers(0, 40))):
        t += 1
        client = draw(st.sampled_from(clients))
        path = draw(st.sampled_from(["a.txt", "b.txt"]))
        if draw(st.booleans()):
            content = draw(st.sampled_from(["x", "y", "hello", "", "ü"]))
            outcome = draw(st.sampled_from(["ok", "ok", "fail", "info"]))
            client.write(t, path, content, outcome)
            if outcome == "ok" or (outcome == "info" and draw(st.booleans())):
                files[(client.session, path)] = content
        elif (client.session, path) in files:
            client.read(t, path, files[(client.session, path)])
    return h


@settings(max_examples=100, deadline=None)
@given(honest_files())
def test_an_honest_store_never_crosses(history: History) -> None:
    verdict = no_crossed_answers.check(history, initial_files={})
    answered = any(r.type in ("ok", "fail", "info") for r in history)
    assert verdict.ok if answered else verdict.unknown, verdict.summary


def test_sessions_on_one_machine_root_may_read_each_others_files() -> None:
    h = History()
    alice, bob = Client(h, "alice", "s1"), Client(h, "bob", "s2")
    bob.write(1, "a.txt", "bob wrote this")
    alice.read(2, "a.txt", "bob wrote this")
    assert not no_crossed_answers.check(h, initial_files={}).ok
    shared = {"s1": "laptop", "s2": "laptop"}
    assert no_crossed_answers.check(h, initial_files={}, file_systems=shared).ok
