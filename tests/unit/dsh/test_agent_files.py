"""The dsh agent's remote file operations (§11.3) and their limits."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import pytest

from tetherbed.agent.dsh import files
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh import schema


def run(tmp_path: Path, **request: object) -> dict:
    result = files.run(dict(request), str(tmp_path), time.monotonic() + 15)
    body = {"requestId": "fsr_1", **result}
    assert schema.problems(body, schema.FS_RESULT) == [], body
    return result


def test_relative_paths_are_refused(tmp_path: Path) -> None:
    for op in ("read", "write", "list", "stat", "mkdir", "delete"):
        result = run(tmp_path, op=op, path="notes.txt")
        assert result == {
            "ok": False,
            "op": op,
            "path": "notes.txt",
            "error": "path must be absolute",
        }
    assert run(tmp_path, op="rename", path=str(tmp_path), newPath="x")["error"] == (
        "path must be absolute"
    )
    assert run(tmp_path, op="chmod", path="/x")["error"].startswith("unknown op")


def test_read_text_by_lines(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("".join(f"line {i}\n" for i in range(10)))
    result = run(tmp_path, op="read", path=str(target), encoding="utf8", offset=2, limit=3)
    assert result["ok"] and result["text"] == "line 2\nline 3\nline 4\n"
    assert (result["lines"], result["truncated"]) == (3, True)
    whole = run(tmp_path, op="read", path=str(target))
    assert whole["lines"] == 10 and not whole["truncated"]


def test_read_stops_at_one_mebibyte(tmp_path: Path) -> None:
    target = tmp_path / "big.txt"
    line = "x" * 1023 + "\n"
    target.write_text(line * 1100)  # 1.07 MiB in 1100 lines
    result = run(tmp_path, op="read", path=str(target), limit=20000)
    assert result["truncated"] and result["bytes"] <= C.FS_READ_MAX_BYTES
    assert result["lines"] == C.FS_READ_MAX_BYTES // 1024
    lines = tmp_path / "many.txt"
    lines.write_text("a\n" * 30000)
    assert run(tmp_path, op="read", path=str(lines), limit=10**9)["lines"] == 20000


def test_read_binary_as_base64_and_refuse_non_utf8_text(tmp_path: Path) -> None:
    target = tmp_path / "bin"
    target.write_bytes(bytes(range(256)))
    result = run(tmp_path, op="read", path=str(target), encoding="base64", offset=250)
    assert base64.b64decode(result["content"]) == bytes(range(250, 256))
    assert result["bytes"] == 6 and not result["truncated"]
    text = run(tmp_path, op="read", path=str(target))
    assert not text["ok"] and "not UTF-8" in text["error"]
    assert "EISDIR" in run(tmp_path, op="read", path=str(tmp_path))["error"]


def test_missing_files_report_the_os_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert run(tmp_path, op="read", path=str(missing))["error"] == (
        f"ENOENT: no such file or directory, open '{missing}'"
    )
    assert run(tmp_path, op="stat", path=str(missing))["error"].startswith("ENOENT")


def test_write_is_atomic_keeps_the_mode_and_creates_dirs(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "f.txt"
    content = base64.b64encode(b"hello").decode()
    refused = run(tmp_path, op="write", path=str(target), content=content)
    assert not refused["ok"] and refused["error"].startswith("ENOENT")
    written = run(tmp_path, op="write", path=str(target), content=content, createDirs=True)
    assert written["ok"] and written["bytes"] == 5 and target.read_bytes() == b"hello"
    target.chmod(0o640)
    run(tmp_path, op="write", path=str(target), content=base64.b64encode(b"bye").decode())
    assert target.read_bytes() == b"bye" and (target.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]  # no temp file left


def test_write_limit_is_checked_before_writing(tmp_path: Path) -> None:
    target = tmp_path / "big"
    too_big = base64.b64encode(b"x" * (C.FS_WRITE_MAX_BYTES + 1)).decode()
    result = run(tmp_path, op="write", path=str(target), content=too_big)
    assert not result["ok"] and "write limit" in result["error"] and not target.exists()
    assert "base64" in run(tmp_path, op="write", path=str(target), content="%%%")["error"]


def test_list_stat_mkdir_rename_delete(tmp_path: Path) -> None:
    (tmp_path / "b").write_text("1")
    (tmp_path / "a").mkdir()
    os.symlink(tmp_path / "b", tmp_path / "c")
    listing = run(tmp_path, op="list", path=str(tmp_path))
    assert [(e["name"], e["type"]) for e in listing["entries"]] == [
        ("a", "dir"),
        ("b", "file"),
        ("c", "symlink"),
    ]
    stat = run(tmp_path, op="stat", path=str(tmp_path / "b"))["stat"]
    assert stat["type"] == "file" and stat["size"] == 1
    assert run(tmp_path, op="mkdir", path=str(tmp_path / "x" / "y"))["ok"]
    assert run(tmp_path, op="rename", path=str(tmp_path / "b"), newPath=str(tmp_path / "d"))["ok"]
    assert (tmp_path / "d").read_text() == "1"
    refused = run(tmp_path, op="delete", path=str(tmp_path / "x"))
    assert not refused["ok"] and refused["error"].startswith("ENOTEMPTY")
    assert run(tmp_path, op="delete", path=str(tmp_path / "x"), recursive=True)["ok"]
    assert not (tmp_path / "x").exists()
    assert not run(tmp_path, op="delete", path="/")["ok"]


def test_list_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "FS_LIST_MAX_ENTRIES", 3)
    for i in range(5):
        (tmp_path / f"f{i}").touch()
    result = run(tmp_path, op="list", path=str(tmp_path))
    assert len(result["entries"]) == 3 and result["truncated"]


def test_glob_relative_to_the_workspace_and_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    for name in ("a.py", "pkg/b.py", "pkg/c.txt"):
        (tmp_path / "src" / name).write_text("x")
    result = run(tmp_path, op="glob", pattern="src/**/*.py")
    assert sorted(e["path"] for e in result["entries"]) == [
        str(tmp_path / "src" / "a.py"),
        str(tmp_path / "src" / "pkg" / "b.py"),
    ]
    monkeypatch.setattr(C, "FS_GLOB_MAX_PATHS", 1)
    assert run(tmp_path, op="glob", pattern="**/*", cwd=str(tmp_path))["truncated"]


def test_grep_with_include_and_a_match_cap(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.py").write_text("needle\n")
    (tmp_path / "a.py").write_text("one\nneedle here\nneedle again\n")
    (tmp_path / "b.txt").write_text("needle\n")
    (tmp_path / "bin.py").write_bytes(b"needle\0")
    result = run(tmp_path, op="grep", pattern="needle", include="*.py")
    assert [(m["path"], m["line"]) for m in result["matches"]] == [
        (str(tmp_path / "a.py"), 2),
        (str(tmp_path / "a.py"), 3),
    ]
    capped = run(tmp_path, op="grep", pattern="needle", path=str(tmp_path), maxMatches=1)
    assert len(capped["matches"]) == 1 and capped["truncated"]
    assert "invalid pattern" in run(tmp_path, op="grep", pattern="(")["error"]
