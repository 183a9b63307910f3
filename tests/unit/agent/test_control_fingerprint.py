"""Directory fingerprints and the strict re-resolution behind them."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tetherbed.agent.control import fingerprint as fp
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


def unavailable(path: str | Path) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        fp.fingerprint(str(path))
    assert caught.value.code == ErrorCode.DIRECTORY_UNAVAILABLE
    return caught.value


def test_fingerprint_is_the_documented_sha256(base: Path) -> None:
    folder = base / "project"
    folder.mkdir()
    info = os.lstat(folder)
    expected = hashlib.sha256(
        b"tetherbed/directory-fingerprint/v1\0"
        + os.fsencode(str(folder))
        + b"\0"
        + f"{info.st_dev}\0{info.st_ino}".encode()
    ).hexdigest()
    assert fp.fingerprint(str(folder)) == expected
    assert fp.is_fingerprint(expected)
    assert fp.fingerprint(str(folder)) == expected  # stable


def test_fingerprint_changes_when_the_directory_is_recreated(base: Path) -> None:
    folder = base / "project"
    folder.mkdir()
    before = fp.fingerprint(str(folder))
    # Move the old one away before creating the new one, so the file system
    # cannot hand the same inode number back (it may, after a plain rmdir).
    folder.rename(base / "old")
    folder.mkdir()
    shutil.rmtree(base / "old")
    after = fp.fingerprint(str(folder))
    assert after != before
    assert fp.is_fingerprint(after)


def test_fingerprint_depends_on_the_path(base: Path) -> None:
    (base / "a").mkdir()
    first = fp.fingerprint(str(base / "a"))
    (base / "a").rename(base / "b")  # same inode, new path
    assert fp.fingerprint(str(base / "b")) != first


def test_strict_resolution_refuses_links_files_and_oddities(base: Path) -> None:
    real = base / "real"
    (real / "inner").mkdir(parents=True)
    (base / "link").symlink_to(real)
    (base / "file").write_text("x")
    assert "symlink" in unavailable(base / "link").message
    assert "symlink" in unavailable(base / "link" / "inner").message  # link mid-path
    assert "no longer a directory" in unavailable(base / "file").message
    assert "no longer exists" in unavailable(base / "missing").message
    unavailable("relative/path")
    unavailable(f"{real}/../real")
    unavailable(f"{real}/")


def test_inaccessible_directory_is_unavailable(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = base / "locked"
    folder.mkdir()
    # Tests run as root, for whom chmod 000 changes nothing: stub the check.
    monkeypatch.setattr(fp.os, "access", lambda *args, **kwargs: False)
    assert "not accessible" in unavailable(folder).message


def test_is_fingerprint() -> None:
    assert fp.is_fingerprint("a" * 64)
    assert not fp.is_fingerprint("A" * 64)
    assert not fp.is_fingerprint("a" * 63)
    assert not fp.is_fingerprint("g" * 64)
    assert not fp.is_fingerprint(None)
