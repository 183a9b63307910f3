"""File operations: every FILE_* rule and error code, judged by what comes back.

Sections: File Operations (FILE_READ, FILE_CONTENTS, FILE_WRITE, ACK, FILE_STAT,
FILE_LIST, FILE_DELETE, FILE_MOVE). A write is judged by reading it back over
the wire, never by looking behind the agent's back; the files a case starts
from are its fixture, put in the root before the agent starts.
"""

from __future__ import annotations

import base64
import os

from tetherbed.simulator.conformance.agent.answers import (
    decoded,
    quote,
    read_bytes,
    read_text,
    require_error,
    require_type,
    stat,
    write_text,
)
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AckPolicy
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case

READ = "File Operations › FILE_READ"
WRITE = "File Operations › FILE_WRITE"
STAT = "File Operations › FILE_STAT"
LIST = "File Operations › FILE_LIST"
DELETE = "File Operations › FILE_DELETE"
MOVE = "File Operations › FILE_MOVE"
ALL_BYTES = bytes(range(256)) * 3


@case(
    "LE-files-read-crlf",
    level=Level.MUST,
    section=f"{READ} › CRLF / LF policy",
    rule="A text read returns the bytes as they are on disk, decoded as UTF-8: CRLF is not "
    "translated to LF.",
)
async def read_crlf(ctx: AgentContext) -> None:
    path = ctx.write("windows.txt", b"one\r\ntwo\r\nthree\n")
    conn = await ctx.connect()
    payload = require_type(await read_text(conn, path), "FILE_CONTENTS", "a text read")
    content = payload.get("content")
    ctx.require(content == "one\r\ntwo\r\nthree\n", f"the content came back as {content!r}")


@case(
    "LE-files-read-text",
    level=Level.MUST,
    section=f"{READ}; FILE_CONTENTS",
    rule="A text read (format text, encoding utf-8) returns the file's UTF-8 text and "
    "FILE_CONTENTS carries content, encoding, size_bytes and truncated.",
)
async def read_text_case(ctx: AgentContext) -> None:
    text = "héllo wörld ✓\nline two\n"
    path = ctx.write("utf8.txt", text)
    conn = await ctx.connect()
    payload = require_type(await read_text(conn, path), "FILE_CONTENTS", "a text read")
    ctx.require(payload.get("content") == text, f"content is {payload.get('content')!r}")
    ctx.require(payload.get("encoding") == "utf-8", f"encoding is {payload.get('encoding')!r}")
    ctx.require(isinstance(payload.get("size_bytes"), int), "size_bytes is not an integer")
    ctx.require(payload.get("truncated") is False, f"truncated is {payload.get('truncated')!r}")


@case(
    "LE-files-read-base64",
    level=Level.MUST,
    section=f"{READ} › encoding ↔ format mapping",
    rule="A bytes read (format bytes, encoding base64) returns the raw bytes base64-encoded.",
)
async def read_base64(ctx: AgentContext) -> None:
    path = ctx.write("blob.bin", ALL_BYTES)
    conn = await ctx.connect()
    answer = await read_bytes(conn, path)
    ctx.require(decoded(answer, "a base64 read") == ALL_BYTES, "the bytes differ from the file's")
    ctx.require(answer.payload.get("encoding") == "base64", "encoding is not base64")


@case(
    "LE-files-read-offset-length",
    level=Level.MUST,
    section=READ,
    rule="offset and length are byte-based: the read returns exactly that range.",
)
async def read_range(ctx: AgentContext) -> None:
    path = ctx.write("digits.txt", b"0123456789abcdef")
    conn = await ctx.connect()
    data = decoded(await read_bytes(conn, path, offset=3, length=4), "a ranged read")
    ctx.require(data == b"3456", f"offset 3 length 4 returned {data!r}")
    rest = decoded(await read_bytes(conn, path, offset=12), "a read from an offset")
    ctx.require(rest == b"cdef", f"offset 12 to the end returned {rest!r}")


def _limited(limit: int) -> AckPolicy:
    return AckPolicy(max_file_size_bytes=limit)


@case(
    "LE-files-read-range-of-large-file",
    level=Level.MUST,
    section=READ,
    rule="A bounded range may be read from a file larger than max_file_size_bytes: the shim "
    "seeks and reads only that range.",
)
async def read_range_large(ctx: AgentContext) -> None:
    data = os.urandom(200_000)
    path = ctx.write("large.bin", data)
    conn = await ctx.connect(_limited(65_536))
    got = decoded(
        await read_bytes(conn, path, offset=150_000, length=1000), "a range of a large file"
    )
    ctx.require(got == data[150_000:151_000], "the range came back with other bytes")


@case(
    "LE-files-read-too-large",
    level=Level.MUST,
    section=READ,
    rule="Whole-file reads and requested ranges larger than the effective limit return "
    "FILE_TOO_LARGE.",
)
async def read_too_large(ctx: AgentContext) -> None:
    path = ctx.write("large.bin", os.urandom(200_000))
    conn = await ctx.connect(_limited(65_536))
    require_error(await read_bytes(conn, path), "FILE_TOO_LARGE", "a whole read over the limit")
    require_error(
        await read_bytes(conn, path, offset=0, length=100_000),
        "FILE_TOO_LARGE",
        "a range longer than the limit",
    )


@case(
    "LE-files-read-missing",
    level=Level.MUST,
    section="Error › PATH_NOT_FOUND",
    rule="FILE_READ of a path that does not exist is PATH_NOT_FOUND.",
)
async def read_missing(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    require_error(await read_text(conn, ctx.root / "nope.txt"), "PATH_NOT_FOUND", "a missing file")


@case(
    "LE-files-write-text",
    level=Level.MUST,
    section=f"{WRITE}; ACK",
    rule="FILE_WRITE of UTF-8 text is acknowledged with ACK {ok: true} and the file then holds "
    "exactly that text.",
)
async def write_text_case(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    path = ctx.root / "out.txt"
    payload = require_type(await write_text(conn, path, "hello\r\nworld ✓\n"), "ACK", "a write")
    ctx.require(payload.get("ok") is True, f"the ACK says {payload!r}")
    back = require_type(await read_text(conn, path), "FILE_CONTENTS", "reading it back")
    ctx.require(
        back.get("content") == "hello\r\nworld ✓\n",
        f"reading it back gave {back.get('content')!r}",
    )


@case(
    "LE-files-write-base64",
    level=Level.MUST,
    section=WRITE,
    rule="FILE_WRITE with encoding base64 writes the decoded bytes.",
)
async def write_base64(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    path = ctx.root / "out.bin"
    answer = await conn.request(
        "FILE_WRITE",
        {"path": str(path), "content": base64.b64encode(ALL_BYTES).decode(),
         "encoding": "base64", "create_parents": False},
    )  # fmt: skip
    require_type(answer, "ACK", "a base64 write")
    got = decoded(await read_bytes(conn, path), "reading it back")
    ctx.require(got == ALL_BYTES, "reading it back gave other bytes")


@case(
    "LE-files-write-overwrite",
    level=Level.MUST,
    section=f"{WRITE}; Idempotency (FILE_WRITE last-write-wins)",
    rule="A second FILE_WRITE to the same path replaces the content (last write wins).",
)
async def write_overwrite(ctx: AgentContext) -> None:
    path = ctx.write("twice.txt", "first version, longer than the second\n")
    conn = await ctx.connect()
    require_type(await write_text(conn, path, "second\n"), "ACK", "the overwrite")
    back = require_type(await read_text(conn, path), "FILE_CONTENTS", "reading it back")
    ctx.require(back.get("content") == "second\n", f"the file holds {back.get('content')!r}")


@case(
    "LE-files-write-create-parents",
    level=Level.MUST,
    section=f"{WRITE} › create_parents",
    rule="With create_parents true the missing parents inside the root are created.",
)
async def create_parents(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    path = ctx.root / "a" / "b" / "c" / "deep.txt"
    require_type(await write_text(conn, path, "deep\n", create_parents=True), "ACK", "the write")
    back = require_type(await read_text(conn, path), "FILE_CONTENTS", "reading it back")
    ctx.require(back.get("content") == "deep\n", "the file does not hold what was written")


@case(
    "LE-files-write-missing-parent",
    level=Level.MUST,
    section=f"{WRITE} › create_parents",
    rule="Without create_parents a write under a missing folder is refused with an ERROR and "
    "creates nothing.",
)
async def missing_parent(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    path = ctx.root / "absent" / "f.txt"
    require_error(await write_text(conn, path, "x\n"), (), "a write under a missing folder")
    answer = require_type(await stat(conn, ctx.root / "absent"), "FILE_STAT_RESPONSE", "stat")
    ctx.require(answer.get("exists") is False, "the missing folder was created")


@case(
    "LE-files-write-too-large",
    level=Level.MUST,
    section="Error › FILE_TOO_LARGE",
    rule="A write whose content exceeds max_file_size_bytes is FILE_TOO_LARGE and writes nothing.",
)
async def write_too_large(ctx: AgentContext) -> None:
    conn = await ctx.connect(_limited(1024))
    path = ctx.root / "big.txt"
    require_error(await write_text(conn, path, "x" * 4096), "FILE_TOO_LARGE", "a 4 KiB write")
    answer = require_type(await stat(conn, path), "FILE_STAT_RESPONSE", "stat afterwards")
    ctx.require(answer.get("exists") is False, "the oversized write left a file behind")


@case(
    "LE-files-stat-file",
    level=Level.MUST,
    section=f"{STAT}; FILE_STAT_RESPONSE",
    rule="FILE_STAT of a file answers exists, is_file, is_dir, is_symlink, size_bytes, mtime, "
    "ctime, mode (POSIX octal text), owner_uid, owner_gid, mime_type and the canonical path.",
)
async def stat_file(ctx: AgentContext) -> None:
    path = ctx.write("data.csv", "col1,col2\n1,2\n")
    path.chmod(0o640)
    conn = await ctx.connect()
    got = require_type(await stat(conn, path), "FILE_STAT_RESPONSE", "stat of a file")
    info = path.stat()
    expected = {
        "exists": True,
        "is_file": True,
        "is_dir": False,
        "is_symlink": False,
        "size_bytes": 14,
        "mode": "0640",
        "owner_uid": info.st_uid,
        "owner_gid": info.st_gid,
        "path": str(path),
    }
    wrong = [f"{k}={got.get(k)!r} (expected {v!r})" for k, v in expected.items() if got.get(k) != v]
    for name in ("mtime", "ctime"):
        if not isinstance(got.get(name), int | float) or isinstance(got.get(name), bool):
            wrong.append(f"{name}={got.get(name)!r}")
    if "mime_type" not in got:
        wrong.append("mime_type absent")
    ctx.require(not wrong, "; ".join(wrong))


@case(
    "LE-files-stat-symlink",
    level=Level.MUST,
    section=STAT,
    rule="With follow_symlinks the path answered is the canonical resolved path; without, "
    "the link itself is described (is_symlink true).",
)
async def stat_symlink(ctx: AgentContext) -> None:
    target = ctx.write("real/target.txt", "t\n")
    link = ctx.root / "alias.txt"
    link.symlink_to(target)
    conn = await ctx.connect()
    followed = require_type(await stat(conn, link, True), "FILE_STAT_RESPONSE", "followed stat")
    ctx.require(followed.get("path") == str(target), f"followed path is {followed.get('path')!r}")
    ctx.require(followed.get("is_file") is True, "the followed link is not a file")
    own = require_type(await stat(conn, link, False), "FILE_STAT_RESPONSE", "stat of the link")
    ctx.require(own.get("is_symlink") is True, f"is_symlink is {own.get('is_symlink')!r}")


@case(
    "LE-files-stat-missing",
    level=Level.MUST,
    section=STAT,
    rule="FILE_STAT of a missing path answers exists false with the other fields null "
    "(path may be set), not an ERROR.",
)
async def stat_missing(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    got = require_type(
        await stat(conn, ctx.root / "ghost.txt"), "FILE_STAT_RESPONSE", "stat of a missing path"
    )
    ctx.require(got.get("exists") is False, f"exists is {got.get('exists')!r}")
    set_fields = [k for k, v in got.items() if k not in ("exists", "path") and v is not None]
    ctx.require(not set_fields, f"fields set for a missing path: {set_fields}")


@case(
    "LE-files-stat-outside-is-error",
    level=Level.MUST,
    section=STAT,
    rule="A path outside the jail is ERROR PATH_OUTSIDE_ALLOWED_ROOT, never FILE_STAT_RESPONSE "
    "with exists false: the two cases must be distinguishable.",
)
async def stat_outside(ctx: AgentContext) -> None:
    secret = ctx.outside / "secret.txt"
    secret.write_text("secret\n")
    conn = await ctx.connect()
    require_error(await stat(conn, secret), "PATH_OUTSIDE_ALLOWED_ROOT", "stat outside the root")
    require_error(
        await stat(conn, ctx.outside / "ghost.txt"),
        "PATH_OUTSIDE_ALLOWED_ROOT",
        "stat of a missing path outside the root",
    )


def _names(answer_payload: dict) -> list[str]:
    return sorted(str(e.get("name")) for e in answer_payload.get("entries") or [])


def _tree(ctx: AgentContext) -> None:
    for name in ("a.csv", "b.txt", ".hidden.csv", "sub/c.csv", "sub/deeper/d.csv", "sub/e.txt"):
        ctx.write(name, name)


async def _list(conn, path, **fields):  # type: ignore[no-untyped-def]
    payload = {"path": str(path), "glob": None, "recursive": False, "include_hidden": False,
               "max_entries": 1000}  # fmt: skip
    payload.update(fields)
    return require_type(await conn.request("FILE_LIST", payload), "FILE_LIST_RESPONSE", "FILE_LIST")


@case(
    "LE-files-list",
    level=Level.MUST,
    section=f"{LIST}; FILE_LIST_RESPONSE",
    rule="FILE_LIST lists a folder's entries (name, path, is_file, is_dir, is_symlink, "
    "size_bytes, mtime), hidden ones only with include_hidden.",
)
async def list_folder(ctx: AgentContext) -> None:
    _tree(ctx)
    conn = await ctx.connect()
    plain = await _list(conn, ctx.root)
    ctx.require(_names(plain) == ["a.csv", "b.txt", "sub"], f"entries {_names(plain)}")
    entry = next(e for e in plain["entries"] if e.get("name") == "a.csv")
    wanted = {"name", "path", "is_file", "is_dir", "is_symlink", "size_bytes", "mtime"}
    ctx.require(wanted <= set(entry), f"an entry lacks {sorted(wanted - set(entry))}")
    ctx.require(entry.get("path") == str(ctx.root / "a.csv"), f"path is {entry.get('path')!r}")
    ctx.require(plain.get("truncated") is False, "truncated is not false")
    hidden = await _list(conn, ctx.root, include_hidden=True)
    ctx.require(".hidden.csv" in _names(hidden), "include_hidden did not show .hidden.csv")


@case(
    "LE-files-list-glob",
    level=Level.MUST,
    section=LIST,
    rule="glob is matched against the basename; combined with recursive it matches at every depth.",
)
async def list_glob(ctx: AgentContext) -> None:
    _tree(ctx)
    conn = await ctx.connect()
    flat = await _list(conn, ctx.root, glob="*.csv")
    ctx.require(_names(flat) == ["a.csv"], f"glob *.csv listed {_names(flat)}")
    deep = await _list(conn, ctx.root, glob="*.csv", recursive=True)
    ctx.require(
        _names(deep) == ["a.csv", "c.csv", "d.csv"], f"recursive *.csv listed {_names(deep)}"
    )


@case(
    "LE-files-list-max-entries",
    level=Level.MUST,
    section=LIST,
    rule="The shim caps the listing at max_entries and says so with truncated true.",
)
async def list_cap(ctx: AgentContext) -> None:
    for number in range(6):
        ctx.write(f"f{number}.txt", "x")
    conn = await ctx.connect()
    got = await _list(conn, ctx.root, max_entries=2)
    ctx.require(len(got.get("entries") or []) == 2, f"{len(got.get('entries') or [])} entries")
    ctx.require(got.get("truncated") is True, f"truncated is {got.get('truncated')!r}")


async def _delete(conn, path, **fields):  # type: ignore[no-untyped-def]
    payload = {"path": str(path), "recursive": False, "missing_ok": False}
    payload.update(fields)
    return await conn.request("FILE_DELETE", payload)


async def _exists(conn, path) -> bool:  # type: ignore[no-untyped-def]
    return bool(
        require_type(await stat(conn, path, False), "FILE_STAT_RESPONSE", "stat").get("exists")
    )


@case(
    "LE-files-delete",
    level=Level.MUST,
    section=DELETE,
    rule="FILE_DELETE of a file answers ACK and the file is gone.",
)
async def delete_file(ctx: AgentContext) -> None:
    path = ctx.write("old.csv", "x")
    conn = await ctx.connect()
    require_type(await _delete(conn, path), "ACK", "deleting a file")
    ctx.require(not await _exists(conn, path), "the file is still there")


@case(
    "LE-files-delete-missing",
    level=Level.MUST,
    section=f"{DELETE}; Error › PATH_NOT_FOUND",
    rule="Deleting a missing path is PATH_NOT_FOUND, unless missing_ok, which answers ACK.",
)
async def delete_missing(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    path = ctx.root / "ghost"
    require_error(await _delete(conn, path), "PATH_NOT_FOUND", "deleting a missing path")
    require_type(await _delete(conn, path, missing_ok=True), "ACK", "with missing_ok")


@case(
    "LE-files-delete-not-empty",
    level=Level.MUST,
    section=f"{DELETE}; Error › PATH_NOT_EMPTY",
    rule="A non-empty folder needs recursive true: without it PATH_NOT_EMPTY and nothing is "
    "deleted; with it ACK and the folder is gone.",
)
async def delete_folder(ctx: AgentContext) -> None:
    ctx.write("full/inner/file.txt", "x")
    conn = await ctx.connect()
    folder = ctx.root / "full"
    require_error(await _delete(conn, folder), "PATH_NOT_EMPTY", "deleting a non-empty folder")
    ctx.require(await _exists(conn, folder / "inner" / "file.txt"), "its content was deleted")
    require_type(await _delete(conn, folder, recursive=True), "ACK", "a recursive delete")
    ctx.require(not await _exists(conn, folder), "the folder is still there")


async def _move(conn, src, dst, overwrite=False):  # type: ignore[no-untyped-def]
    return await conn.request(
        "FILE_MOVE", {"src": str(src), "dst": str(dst), "overwrite": overwrite}
    )


@case(
    "LE-files-move",
    level=Level.MUST,
    section=MOVE,
    rule="FILE_MOVE renames a file: ACK, the source is gone and the destination holds it.",
)
async def move_file(ctx: AgentContext) -> None:
    src = ctx.write("a.csv", "moved\n")
    conn = await ctx.connect()
    dst = ctx.root / "b.csv"
    require_type(await _move(conn, src, dst), "ACK", "a rename")
    ctx.require(not await _exists(conn, src), "the source is still there")
    back = require_type(await read_text(conn, dst), "FILE_CONTENTS", "reading the destination")
    ctx.require(back.get("content") == "moved\n", "the destination does not hold the file")


@case(
    "LE-files-move-exists",
    level=Level.MUST,
    section=f"{MOVE}; Error › PATH_EXISTS",
    rule="With overwrite false and an existing destination the move is PATH_EXISTS and both "
    "files stay; with overwrite true the destination is replaced.",
)
async def move_exists(ctx: AgentContext) -> None:
    src = ctx.write("src.txt", "new\n")
    dst = ctx.write("dst.txt", "old\n")
    conn = await ctx.connect()
    require_error(await _move(conn, src, dst), "PATH_EXISTS", "a move onto an existing file")
    back = require_type(await read_text(conn, dst), "FILE_CONTENTS", "reading the destination")
    ctx.require(back.get("content") == "old\n", "the destination changed")
    require_type(await _move(conn, src, dst, overwrite=True), "ACK", "the same move, overwrite")
    back = require_type(await read_text(conn, dst), "FILE_CONTENTS", "reading it again")
    ctx.require(back.get("content") == "new\n", "overwrite did not replace the destination")


@case(
    "LE-files-move-missing",
    level=Level.MUST,
    section=f"{MOVE}; Idempotency (FILE_MOVE replay)",
    rule="Moving a source that does not exist is PATH_NOT_FOUND.",
)
async def move_missing(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    answer = await _move(conn, ctx.root / "ghost", ctx.root / "dst")
    require_error(answer, "PATH_NOT_FOUND", "moving a missing source")


@case(
    "LE-files-move-cross-device",
    level=Level.MUST,
    section=MOVE,
    rule="A move between two file systems inside the root is allowed (copy and delete): ACK, "
    "the source gone, the destination holding the data.",
    needs={"unshare"},
)
async def move_cross_device(ctx: AgentContext) -> None:
    mount = ctx.root / "other-device"
    mount.mkdir()
    script = 'mount -t tmpfs tmpfs "$0" && exec "$@"'
    conn = await ctx.connect(wrap=["unshare", "-rm", "sh", "-c", script, str(mount)])
    src = mount / "payload.bin"
    answer = await conn.request(
        "FILE_WRITE",
        {"path": str(src), "content": base64.b64encode(ALL_BYTES).decode(),
         "encoding": "base64", "create_parents": False},
    )  # fmt: skip
    require_type(answer, "ACK", "writing the source on the other file system")
    dst = ctx.root / "payload.bin"
    move = await _move(conn, src, dst)
    if move.type != "ACK":
        ctx.depart(f"the cross-device move was answered {quote(move)}")
    ctx.require(not await _exists(conn, src), "the source is still there after the move")
    got = decoded(await read_bytes(conn, dst), "reading the destination")
    ctx.require(got == ALL_BYTES, "the destination holds other bytes")
