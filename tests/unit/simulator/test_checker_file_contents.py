"""file_contents: final files hold what the acknowledged writes imply."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.checkers import file_contents
from tetherbed.simulator.history import History


def op(
    h: History, t: float, kind: str, outcome: str | None, *, done: float | None = None, **payload
) -> tuple[int, int | None]:
    """One operation on session s1: invoke at t, completion at `done` (t + 0.1)."""
    req = f"r{len(h)}"
    value = {"payload": payload, "digest": req}
    invoked = h.append(t, "client:alice", "invoke", kind, value, session="s1", req=req).index
    if outcome is None:
        return invoked, None
    answer = {"type": "ACK"} if outcome == "ok" else {"type": "ERROR", "code": "X"}
    end = t + 0.1 if done is None else done
    completed = h.append(end, "client:alice", outcome, kind, answer, session="s1", req=req)
    return invoked, completed.index


def final(h: History, t: float, path: str, content: str | None, **extra: object) -> int:
    value = {"path": path, "exists": content is not None, "content": content, "digest": None}
    value.update(extra)
    return h.append(t, "runner", "event", "final_file", value, session="s1").index


def test_the_last_acknowledged_write_wins() -> None:
    h = History()
    op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    op(h, 2, "FILE_WRITE", "ok", path="a.txt", content="v2")
    op(h, 3, "FILE_WRITE", "fail", path="a.txt", content="v3")
    final(h, 9, "a.txt", "v2")
    verdict = file_contents.check(h)
    assert verdict.ok, verdict.summary
    assert "1 final file" in verdict.summary


def test_a_lost_acknowledged_write_is_named() -> None:
    h = History()
    op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    invoked, acked = op(h, 2, "FILE_WRITE", "ok", path="a.txt", content="v2")
    end = final(h, 9, "a.txt", "v1")
    verdict = file_contents.check(h)
    assert not verdict.ok
    assert verdict.evidence_indexes() == sorted([invoked, acked, end])
    assert "lost write" in verdict.summary and "'v2'" in verdict.summary


def test_a_missing_file_after_an_acknowledged_write_is_a_lost_write() -> None:
    h = History()
    op(h, 1, "FILE_DELETE", "ok", path="a.txt")
    invoked, _ = op(h, 2, "FILE_WRITE", "ok", path="a.txt", content="v1")
    final(h, 9, "a.txt", None)
    verdict = file_contents.check(h)
    assert not verdict.ok and invoked in verdict.evidence_indexes()
    assert "does not exist" in verdict.summary and "lost write" in verdict.summary


def test_an_acknowledged_delete_after_the_last_write_means_absent() -> None:
    h = History()
    op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    op(h, 2, "FILE_DELETE", "ok", path="a.txt")
    final(h, 9, "a.txt", None)
    assert file_contents.check(h).ok
    h2 = History()
    op(h2, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    op(h2, 2, "FILE_DELETE", "ok", path="a.txt")
    final(h2, 9, "a.txt", "v1")
    verdict = file_contents.check(h2)
    assert not verdict.ok and "should have been deleted" in verdict.summary


def test_unknown_and_in_flight_writes_may_have_landed() -> None:
    for outcome in ("info", None):
        h = History()
        op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
        op(h, 2, "FILE_WRITE", outcome, path="a.txt", content="v2")
        final(h, 9, "a.txt", "v2")
        assert file_contents.check(h).ok, outcome
        h2 = History()
        op(h2, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
        op(h2, 2, "FILE_WRITE", outcome, path="a.txt", content="v2")
        final(h2, 9, "a.txt", "v1")
        assert file_contents.check(h2).ok, outcome


def test_concurrent_acknowledged_writes_may_land_in_either_order() -> None:
    h = History()
    op(h, 1, "FILE_WRITE", "ok", done=3, path="a.txt", content="v1")
    op(h, 2, "FILE_WRITE", "ok", done=2.5, path="a.txt", content="v2")
    final(h, 9, "a.txt", "v1")
    assert file_contents.check(h).ok
    final(h, 9, "a.txt", "v2")
    assert file_contents.check(h).ok


def test_initial_files_and_untouched_paths() -> None:
    h = History()
    final(h, 9, "seed.txt", "original")
    assert "could not be judged" in file_contents.check(h).summary
    assert file_contents.check(h, initial_files={"seed.txt": "original"}).ok
    assert not file_contents.check(h, initial_files={"seed.txt": "changed"}).ok
    assert not file_contents.check(h, initial_files={}).ok  # should not exist


def test_digest_is_used_when_content_is_not_given() -> None:
    import hashlib

    h = History()
    op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    good = hashlib.sha256(b"v1").hexdigest()[:16]
    h.append(
        9,
        "runner",
        "event",
        "final_file",
        {"path": "a.txt", "exists": True, "content": None, "digest": good},
        session="s1",
    )
    assert file_contents.check(h).ok
    h.append(
        9,
        "runner",
        "event",
        "final_file",
        {"path": "a.txt", "exists": True, "content": None, "digest": "0" * 16},
        session="s1",
    )
    assert not file_contents.check(h).ok


def test_moves_and_commands_make_a_file_unknown() -> None:
    h = History()
    op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    op(h, 2, "FILE_MOVE", "ok", src="b.txt", dst="a.txt")
    final(h, 9, "a.txt", "from b")
    assert file_contents.check(h).unknown
    h2 = History()
    op(h2, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    op(h2, 2, "EXECUTE_COMMAND", "ok", command="echo x >> a.txt")
    final(h2, 9, "a.txt", "v1\nx\n")
    assert file_contents.check(h2).unknown
    h3 = History()
    op(h3, 1, "FILE_WRITE", "ok", path="c.txt", content="v1")
    op(h3, 2, "FILE_MOVE", "ok", src="c.txt", dst="d.txt")
    final(h3, 9, "c.txt", None)
    assert file_contents.check(h3).ok


def test_sessions_do_not_share_files() -> None:
    h = History()
    op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="v1")
    h.append(
        9,
        "runner",
        "event",
        "final_file",
        {"path": "a.txt", "exists": False, "content": None},
        session="s2",
    )
    assert "could not be judged" in file_contents.check(h).summary


@st.composite
def faithful_disk(draw: st.DrawFn) -> History:
    """Sequential writes and deletes against a real dict; info ones may or may not land."""
    h = History()
    disk: dict[str, str] = {}
    t = 0.0
    for _ in range(draw(st.integers(0, 30))):
        t += 1
        path = draw(st.sampled_from(["a.txt", "b.txt"]))
        outcome = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
        lands = outcome == "ok" or (outcome == "info" and draw(st.booleans()))
        if draw(st.integers(0, 4)) == 0:
            op(h, t, "FILE_DELETE", outcome, path=path)
            if lands:
                disk.pop(path, None)
        else:
            content = draw(st.sampled_from(["v1", "v2", "v3", ""]))
            op(h, t, "FILE_WRITE", outcome, path=path, content=content)
            if lands:
                disk[path] = content
    for path in ("a.txt", "b.txt"):
        final(h, t + 5, path, disk.get(path))
    return h


@settings(max_examples=150, deadline=None)
@given(faithful_disk())
def test_a_faithful_disk_always_passes(history: History) -> None:
    verdict = file_contents.check(history, initial_files={})
    assert verdict.ok, verdict.summary


@settings(max_examples=80, deadline=None)
@given(faithful_disk())
def test_dropping_the_last_acknowledged_write_is_caught(history: History) -> None:
    ops = {r.req: r for r in history if r.type == "invoke"}
    oks = [ops[r.req] for r in history if r.type == "ok" and ops[r.req].f == "FILE_WRITE"]
    if not oks:
        return
    last = oks[-1]
    path = last.value["payload"]["path"]
    later = [
        r
        for r in history
        if r.type == "invoke" and r.index > last.index and r.value["payload"].get("path") == path
    ]
    if later:
        return  # something else may have overwritten it
    # Re-indexed so that the appended record gets a fresh index; the removed
    # final_file records were the last ones, so earlier indexes do not move.
    tampered = History.merged(
        r for r in history if not (r.f == "final_file" and r.value["path"] == path)
    )
    final(tampered, 1000, path, "corrupted")
    verdict = file_contents.check(tampered, initial_files={})
    assert not verdict.ok
    assert last.index in verdict.evidence_indexes()


def test_sessions_on_one_machine_root_share_files() -> None:
    h = History()
    op(h, 1, "FILE_WRITE", "ok", path="a.txt", content="from s1")
    other = h.append(
        2,
        "client:bob",
        "invoke",
        "FILE_WRITE",
        {"payload": {"path": "a.txt", "content": "from s2"}},
        session="s2",
        req="b1",
    )
    h.append(2.1, "client:bob", "ok", "FILE_WRITE", {"type": "ACK"}, session="s2", req="b1")
    final(h, 9, "a.txt", "from s2")
    assert not file_contents.check(h).ok
    verdict = file_contents.check(h, file_systems={"s1": "laptop", "s2": "laptop"})
    assert verdict.ok, verdict.summary
    assert other.index not in verdict.evidence_indexes()
