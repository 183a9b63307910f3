"""DIRECTORY_LIST_REQUEST: roots, paging, the scan bound, skipping, references."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tetherbed.agent.control import browse
from tetherbed.agent.control import fingerprint as fp
from tetherbed.agent.control.browse import Browser
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import DirectoryListRequest, DirectoryListResponse


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def make_dirs(parent: Path, count: int, prefix: str = "d") -> None:
    parent.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (parent / f"{prefix}{i:04d}").mkdir()


def start(browser: Browser) -> DirectoryListResponse:
    return browser.list_directory(DirectoryListRequest())


def listing(
    browser: Browser, browse_id: str, ref: str, cursor: str | None = None
) -> DirectoryListResponse:
    return browser.list_directory(
        DirectoryListRequest(browse_id=browse_id, directory_ref=ref, cursor=cursor)
    )


def error(code: ErrorCode, browser: Browser, **fields: str | None) -> str:
    with pytest.raises(ProtocolError) as caught:
        browser.list_directory(DirectoryListRequest(**fields))
    assert caught.value.code == code
    return caught.value.message


def ref_of(response: DirectoryListResponse, name: str) -> str:
    return next(e.directory_ref for e in response.entries if e.name == name)


def names(response: DirectoryListResponse) -> list[str]:
    return [entry.name for entry in response.entries]


# --- roots --------------------------------------------------------------------


def test_roots_are_canonical_and_the_browse_lasts_five_minutes(
    base: Path, clock: ManualClock
) -> None:
    (base / "work").mkdir()
    (base / "media").mkdir()
    (base / "alias").symlink_to(base / "media")
    browser = Browser([base / "work", base / "alias", base / "missing", base / "media"], clock)
    roots = start(browser)
    assert [(e.name, e.path) for e in roots.entries] == [
        ("work", str(base / "work")),
        ("media", str(base / "media")),  # the alias resolves to it; listed once
    ]
    assert roots.current is None and roots.parent_ref is None
    assert roots.next_cursor is None and roots.truncated is False
    assert roots.expires_at == clock.time() + 300
    refs = [e.directory_ref for e in roots.entries] + [roots.browse_id]
    assert len(set(refs)) == len(refs)
    assert all(str(base) not in ref for ref in refs)  # opaque, never a path


def test_default_root_is_home(
    base: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (base / "alice").mkdir()
    monkeypatch.setenv("HOME", str(base / "alice"))
    roots = start(Browser(None, clock))
    assert [(e.name, e.path) for e in roots.entries] == [("Home", str(base / "alice"))]


def test_special_roots_are_skipped(clock: ManualClock) -> None:
    browser = Browser(["/"], clock)
    roots = start(browser)
    top = listing(browser, roots.browse_id, roots.entries[0].directory_ref)
    paths = {entry.path for entry in top.entries}
    assert not paths & {"/proc", "/sys", "/dev"}
    assert Browser(["/proc"], clock).list_directory(DirectoryListRequest()).entries == []


# --- listing ------------------------------------------------------------------


def test_only_real_accessible_directories_are_listed(
    base: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = base / "root"
    for name in ("alpha", "Beta", "gamma", "locked", "vanishing", "morphing"):
        (root / name).mkdir(parents=True)
    (root / "file.txt").write_text("x")
    (root / "link-to-dir").symlink_to(root / "alpha")
    (root / "dangling").symlink_to(root / "nowhere")
    os.mkfifo(root / "fifo")
    os.mkdir(os.fsencode(root) + b"/not-utf8-\xff")
    # Tests run as root (chmod 000 would not stop us), so stub the races:
    # "locked" reads as inaccessible; "vanishing" disappears and "morphing"
    # turns into a file right after the scan saw it and before its stat.
    real_accessible = browse.accessible
    monkeypatch.setattr(
        browse, "accessible", lambda name, fd: name != "locked" and real_accessible(name, fd)
    )
    real_stat = os.stat

    def stat_after_vanish(path, *args, dir_fd=None, follow_symlinks=True):  # type: ignore[no-untyped-def]
        if path == "vanishing" and dir_fd is not None:
            os.rmdir(path, dir_fd=dir_fd)
        if path == "morphing" and dir_fd is not None:  # became a file meanwhile
            os.rmdir(path, dir_fd=dir_fd)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, dir_fd=dir_fd))
        return real_stat(path, *args, dir_fd=dir_fd, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(os, "stat", stat_after_vanish)

    browser = Browser([root], clock)
    roots = start(browser)
    page = listing(browser, roots.browse_id, roots.entries[0].directory_ref)
    assert names(page) == ["alpha", "Beta", "gamma"]
    assert [e.path for e in page.entries] == [str(root / n) for n in ("alpha", "Beta", "gamma")]
    assert page.truncated is False and page.next_cursor is None
    assert page.current is not None
    assert (page.current.path, page.current.directory_ref) == (
        str(root),
        roots.entries[0].directory_ref,
    )
    assert page.parent_ref is None  # the parent of a root is outside every root


def test_parent_ref_walks_back_up_inside_the_root(base: Path, clock: ManualClock) -> None:
    root = base / "root"
    (root / "a" / "b").mkdir(parents=True)
    browser = Browser([root], clock)
    roots = start(browser)
    root_ref = roots.entries[0].directory_ref
    top = listing(browser, roots.browse_id, root_ref)
    a = listing(browser, roots.browse_id, ref_of(top, "a"))
    assert a.parent_ref == root_ref
    b = listing(browser, roots.browse_id, ref_of(a, "b"))
    assert b.parent_ref == ref_of(top, "a")
    assert b.entries == []
    up = listing(browser, roots.browse_id, b.parent_ref)
    assert up.current is not None and up.current.path == str(root / "a")


def test_paging_by_200_with_host_cursors(base: Path, clock: ManualClock) -> None:
    root = base / "root"
    make_dirs(root / "many", 450)
    make_dirs(root / "other", 1)
    browser = Browser([root], clock)
    roots = start(browser)
    bid = roots.browse_id
    many = ref_of(listing(browser, bid, roots.entries[0].directory_ref), "many")
    first = listing(browser, bid, many)
    assert len(first.entries) == 200 and first.next_cursor is not None
    second = listing(browser, bid, many, first.next_cursor)
    assert len(second.entries) == 200 and second.next_cursor is not None
    third = listing(browser, bid, many, second.next_cursor)
    assert len(third.entries) == 50 and third.next_cursor is None
    seen = names(first) + names(second) + names(third)
    assert seen == [f"d{i:04d}" for i in range(450)]
    assert not any(page.truncated for page in (first, second, third))
    assert third.current is not None and third.current.directory_ref == many
    # A cursor is reusable within its browse and yields the same page.
    again = listing(browser, bid, many, first.next_cursor)
    assert names(again) == names(second) and again.next_cursor == second.next_cursor
    assert [e.directory_ref for e in again.entries] == [e.directory_ref for e in second.entries]
    # ...but bound to its directory and its browse, and never forgeable.
    other = ref_of(listing(browser, bid, roots.entries[0].directory_ref), "other")
    error(
        ErrorCode.DIRECTORY_REFERENCE_INVALID,
        browser,
        browse_id=bid,
        directory_ref=other,
        cursor=first.next_cursor,
    )
    error(
        ErrorCode.DIRECTORY_REFERENCE_INVALID,
        browser,
        browse_id=bid,
        directory_ref=many,
        cursor="200",
    )
    assert first.next_cursor not in {str(root / "many"), "200"}


def test_scan_bound_of_1000_entries_per_browse(base: Path, clock: ManualClock) -> None:
    root = base / "root"
    make_dirs(root / "six", 600)
    make_dirs(root / "more", 600)
    for i in range(5):
        (root / "more" / f"file{i}").write_text("x")  # files count as scanned
    browser = Browser([root], clock)
    roots = start(browser)
    bid = roots.browse_id
    top = listing(browser, bid, roots.entries[0].directory_ref)  # scans 2 entries
    six = ref_of(top, "six")
    pages = [listing(browser, bid, six)]
    while pages[-1].next_cursor:
        pages.append(listing(browser, bid, six, pages[-1].next_cursor))
    assert sum(len(p.entries) for p in pages) == 600
    assert not any(p.truncated for p in pages)
    # 2 + 600 scanned so far: 398 entries are left for "more" (605 entries).
    more = ref_of(top, "more")
    pages = [listing(browser, bid, more)]
    while pages[-1].next_cursor:
        pages.append(listing(browser, bid, more, pages[-1].next_cursor))
    listed = sum(len(p.entries) for p in pages)
    assert 393 <= listed <= 398
    assert all(p.truncated for p in pages)
    # The budget is spent: further listings see nothing and say so.
    exhausted = listing(browser, bid, six)
    assert exhausted.entries == [] and exhausted.truncated is True
    # A fresh browse has a fresh budget.
    fresh = start(browser)
    top2 = listing(browser, fresh.browse_id, fresh.entries[0].directory_ref)
    assert len(listing(browser, fresh.browse_id, ref_of(top2, "six")).entries) == 200


def test_exactly_the_bound_is_not_truncated(base: Path, clock: ManualClock) -> None:
    root = base / "root"
    make_dirs(root, 1000)
    browser = Browser([root], clock)
    roots = start(browser)
    pages = [listing(browser, roots.browse_id, roots.entries[0].directory_ref)]
    while pages[-1].next_cursor:
        pages.append(
            listing(browser, roots.browse_id, roots.entries[0].directory_ref, pages[-1].next_cursor)
        )
    assert [len(p.entries) for p in pages] == [200] * 5
    assert not any(p.truncated for p in pages)
    (root / "one-more").mkdir()
    fresh = start(browser)
    first = listing(browser, fresh.browse_id, fresh.entries[0].directory_ref)
    assert first.truncated is True


# --- references ---------------------------------------------------------------


def test_browse_expires_after_five_minutes(base: Path, clock: ManualClock) -> None:
    (base / "root" / "a").mkdir(parents=True)
    browser = Browser([base / "root"], clock)
    roots = start(browser)
    ref = roots.entries[0].directory_ref
    clock.advance(299.9)
    listing(browser, roots.browse_id, ref)
    clock.advance(0.1)
    message = error(
        ErrorCode.DIRECTORY_REFERENCE_INVALID, browser, browse_id=roots.browse_id, directory_ref=ref
    )
    assert "expired" in message
    error(
        ErrorCode.DIRECTORY_REFERENCE_INVALID, browser, browse_id=roots.browse_id, directory_ref=ref
    )


def test_invalidate_all_kills_every_reference(base: Path, clock: ManualClock) -> None:
    make_dirs(base / "root", 250)
    browser = Browser([base / "root"], clock)
    roots = start(browser)
    page = listing(browser, roots.browse_id, roots.entries[0].directory_ref)
    browser.invalidate_all()
    for ref in (roots.entries[0].directory_ref, page.entries[0].directory_ref):
        error(
            ErrorCode.DIRECTORY_REFERENCE_INVALID,
            browser,
            browse_id=roots.browse_id,
            directory_ref=ref,
        )
    error(
        ErrorCode.DIRECTORY_REFERENCE_INVALID,
        browser,
        browse_id=roots.browse_id,
        directory_ref=roots.entries[0].directory_ref,
        cursor=page.next_cursor,
    )
    with pytest.raises(ProtocolError):
        browser.selected(roots.browse_id, page.entries[0].directory_ref)


def test_forged_and_foreign_references_are_rejected(base: Path, clock: ManualClock) -> None:
    (base / "root" / "a").mkdir(parents=True)
    browser = Browser([base / "root"], clock)
    first = start(browser)
    second = start(browser)
    ref = first.entries[0].directory_ref
    invalid = ErrorCode.DIRECTORY_REFERENCE_INVALID
    error(invalid, browser, browse_id=second.browse_id, directory_ref=ref)  # foreign
    error(invalid, browser, browse_id=first.browse_id, directory_ref=str(base / "root"))
    error(invalid, browser, browse_id=first.browse_id, directory_ref="x" * 10_000)
    error(invalid, browser, browse_id=first.browse_id, directory_ref="")
    error(invalid, browser, browse_id="forged", directory_ref=ref)
    error(invalid, browser, browse_id=first.browse_id)  # only one of the pair
    error(invalid, browser, directory_ref=ref)
    error(invalid, browser, cursor="anything")
    # Both browses stay usable after all that.
    listing(browser, first.browse_id, ref)
    listing(browser, second.browse_id, second.entries[0].directory_ref)


def test_live_browses_are_bounded(base: Path, clock: ManualClock) -> None:
    (base / "root").mkdir()
    browser = Browser([base / "root"], clock)
    oldest = start(browser)
    for _ in range(browse.MAX_BROWSES):
        start(browser)
    assert browser.live_browses == browse.MAX_BROWSES
    error(
        ErrorCode.DIRECTORY_REFERENCE_INVALID,
        browser,
        browse_id=oldest.browse_id,
        directory_ref=oldest.entries[0].directory_ref,
    )


def test_references_name_the_directory_object(base: Path, clock: ManualClock) -> None:
    root = base / "root"
    for name in ("swapped", "linked", "gone"):
        (root / name).mkdir(parents=True)
    browser = Browser([root], clock)
    roots = start(browser)
    top = listing(browser, roots.browse_id, roots.entries[0].directory_ref)

    (root / "swapped").rename(base / "old")
    (root / "swapped").mkdir()  # same path, another directory
    shutil.rmtree(root / "linked")
    (root / "linked").symlink_to(base / "old")
    (root / "gone").rmdir()

    unavailable = ErrorCode.DIRECTORY_UNAVAILABLE
    assert "replaced" in error(
        unavailable, browser, browse_id=roots.browse_id, directory_ref=ref_of(top, "swapped")
    )
    assert "symlink" in error(
        unavailable, browser, browse_id=roots.browse_id, directory_ref=ref_of(top, "linked")
    )
    assert "no longer exists" in error(
        unavailable, browser, browse_id=roots.browse_id, directory_ref=ref_of(top, "gone")
    )
    with pytest.raises(ProtocolError) as caught:
        browser.selected(roots.browse_id, ref_of(top, "linked"))
    assert caught.value.code == unavailable


def test_selected_fingerprints_and_consume_ends_the_browse(base: Path, clock: ManualClock) -> None:
    (base / "root" / "proj").mkdir(parents=True)
    browser = Browser([base / "root"], clock)
    roots = start(browser)
    top = listing(browser, roots.browse_id, roots.entries[0].directory_ref)
    selection = browser.selected(roots.browse_id, ref_of(top, "proj"))
    assert selection.path == str(base / "root" / "proj")
    assert selection.fingerprint == fp.fingerprint(selection.path)
    browser.selected(roots.browse_id, ref_of(top, "proj"))  # selecting does not consume
    browser.consume(roots.browse_id)
    with pytest.raises(ProtocolError) as caught:
        browser.selected(roots.browse_id, ref_of(top, "proj"))
    assert caught.value.code == ErrorCode.DIRECTORY_REFERENCE_INVALID


def test_listing_a_directory_that_cannot_be_read_is_unavailable(
    base: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (base / "root").mkdir()
    browser = Browser([base / "root"], clock)
    roots = start(browser)

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(browse.os, "scandir", refuse)
    message = error(
        ErrorCode.DIRECTORY_UNAVAILABLE,
        browser,
        browse_id=roots.browse_id,
        directory_ref=roots.entries[0].directory_ref,
    )
    assert "cannot be read" in message
