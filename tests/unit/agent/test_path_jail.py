"""The path jail: resolution, refusals, and the attack table run through every file operation."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import FILE_OPERATIONS
from tetherbed.agent.path_jail import (
    MAX_SYMLINK_HOPS,
    PathJail,
    protocol_error_from_os_error,
)
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import PAYLOAD_MODELS, MessageType

OUTSIDE = ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
NOT_FOUND = ErrorCode.PATH_NOT_FOUND
INVALID_CHARS = ErrorCode.PATH_INVALID_CHARS
TOO_LONG = ExtensionCode.PATH_TOO_LONG


@pytest.fixture
def arena(tmp_path: Path) -> dict[str, Path]:
    """A root with traps in it, an outside tree, and a sibling sharing the root's prefix."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    sibling = tmp_path / "root-sibling"
    for directory in (root / "sub", outside / "nested", sibling):
        directory.mkdir(parents=True)
    (root / "file.txt").write_text("inside")
    (root / "sub" / "inner.txt").write_text("inner")
    (outside / "secret.txt").write_text("secret")
    (outside / "nested" / "deep.txt").write_text("deep")
    (sibling / "secret.txt").write_text("sibling secret")
    (root / "link-out").symlink_to(outside)
    (root / "link-out-file").symlink_to(outside / "secret.txt")
    (root / "link-out-relative").symlink_to("../outside/secret.txt")
    (root / "link-in").symlink_to("file.txt")
    (root / "link-in-absolute").symlink_to(root / "sub")
    (root / "loop-a").symlink_to("loop-b")
    (root / "loop-b").symlink_to("loop-a")
    (root / "self-loop").symlink_to("self-loop")
    return {"root": root, "outside": outside, "sibling": sibling, "tmp": tmp_path}


@pytest.fixture
def jail(arena: dict[str, Path]) -> PathJail:
    return PathJail(str(arena["root"]))


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every entry under a directory with its content (files) or kind, to prove nothing changed."""
    state: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_symlink():
            state[str(path)] = f"link:{os.readlink(path)}"
        elif path.is_file():
            state[str(path)] = path.read_bytes()
        else:
            state[str(path)] = "dir"
    return state


def error_of(call: Any, *args: Any, **kwargs: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        call(*args, **kwargs)
    return caught.value


# --- construction --------------------------------------------------------------


def test_root_is_canonicalised(arena: dict[str, Path]) -> None:
    alias = arena["tmp"] / "alias"
    alias.symlink_to(arena["root"])
    jail = PathJail(str(alias) + "/./")
    assert jail.root == os.path.realpath(arena["root"])


def test_root_must_be_an_existing_directory(arena: dict[str, Path]) -> None:
    with pytest.raises(FileNotFoundError):
        PathJail(str(arena["tmp"] / "missing"))
    with pytest.raises(NotADirectoryError):
        PathJail(str(arena["root"] / "file.txt"))


# --- resolution ----------------------------------------------------------------


@pytest.mark.parametrize(
    "wire_path",
    [
        "file.txt",
        "./file.txt",
        "sub/../file.txt",
        "../root/file.txt",
        "link-in",
        "sub//../file.txt",
    ],
)
def test_relative_paths_resolve_inside_the_root(jail: PathJail, wire_path: str) -> None:
    assert jail.resolve_existing(wire_path) == os.path.join(jail.root, "file.txt")


def test_absolute_and_relative_paths_agree(jail: PathJail) -> None:
    absolute = os.path.join(jail.root, "sub", "inner.txt")
    assert jail.resolve_existing(absolute) == jail.resolve_existing("sub/inner.txt") == absolute


def test_absolute_symlink_target_inside_the_root_is_followed(jail: PathJail) -> None:
    assert jail.resolve_existing("link-in-absolute/inner.txt") == os.path.join(
        jail.root, "sub", "inner.txt"
    )


def test_the_root_itself_resolves(jail: PathJail) -> None:
    for wire_path in (".", jail.root, jail.root + "/", "sub/.."):
        assert jail.resolve_existing(wire_path) == jail.root


def test_final_symlink_is_not_followed_when_asked(jail: PathJail) -> None:
    link = os.path.join(jail.root, "link-out-file")
    assert jail.resolve_existing("link-out-file", follow_symlinks=False) == link
    # ... but an intermediate one always is, so this still escapes.
    assert error_of(jail.resolve_existing, "link-out/secret.txt", follow_symlinks=False).code == (
        OUTSIDE
    )


def test_missing_path_is_located_but_not_resolved(jail: PathJail) -> None:
    location = jail.locate("sub/missing/deeper.txt")
    assert not location.exists
    assert location.path == os.path.join(jail.root, "sub", "missing", "deeper.txt")
    error = error_of(jail.resolve_existing, "sub/missing/deeper.txt")
    assert error.code == NOT_FOUND
    assert "sub/missing/deeper.txt" in error.message


def test_path_through_a_file_does_not_exist(jail: PathJail) -> None:
    assert not jail.locate("file.txt/child").exists
    assert error_of(jail.resolve_existing, "file.txt/child").code == NOT_FOUND


def test_symlink_chain_of_the_kernel_limit_resolves_and_one_more_is_a_loop(
    jail: PathJail,
) -> None:
    root = Path(jail.root)
    previous = "file.txt"
    for hop in range(MAX_SYMLINK_HOPS + 1):
        (root / f"chain-{hop}").symlink_to(previous)
        previous = f"chain-{hop}"
    assert jail.resolve_existing(f"chain-{MAX_SYMLINK_HOPS - 1}") == str(root / "file.txt")
    error = error_of(jail.resolve_existing, f"chain-{MAX_SYMLINK_HOPS}")
    assert error.code == NOT_FOUND
    assert error.details is not None and error.details["reason"] == "symlink_loop"


def test_empty_path_is_an_invalid_message(jail: PathJail) -> None:
    assert error_of(jail.locate, "").code == ExtensionCode.INVALID_MESSAGE


# --- resolve_directory (a command's cwd) ----------------------------------------


def test_resolve_directory(jail: PathJail) -> None:
    assert jail.resolve_directory(None) == jail.root
    assert jail.resolve_directory("sub") == os.path.join(jail.root, "sub")
    assert jail.resolve_directory("link-in-absolute") == os.path.join(jail.root, "sub")
    assert error_of(jail.resolve_directory, "file.txt").code == ExtensionCode.NOT_A_DIRECTORY
    assert error_of(jail.resolve_directory, "nope").code == NOT_FOUND
    assert error_of(jail.resolve_directory, "link-out").code == OUTSIDE
    assert error_of(jail.resolve_directory, "/").code == OUTSIDE


# --- resolve_for_create ----------------------------------------------------------


def test_create_in_an_existing_directory(jail: PathJail) -> None:
    target = jail.resolve_for_create("sub/new.txt", create_parents=False)
    assert (target.exists, target.ancestor, target.missing_parents, target.name) == (
        False,
        os.path.join(jail.root, "sub"),
        (),
        "new.txt",
    )


def test_create_with_missing_parents_needs_create_parents(jail: PathJail) -> None:
    error = error_of(jail.resolve_for_create, "a/b/new.txt", create_parents=False)
    assert error.code == NOT_FOUND
    target = jail.resolve_for_create("a/b/new.txt", create_parents=True)
    assert target.ancestor == jail.root
    assert target.missing_parents == ("a", "b")
    assert target.path == os.path.join(jail.root, "a", "b", "new.txt")


def test_create_below_a_file_is_not_a_directory(jail: PathJail) -> None:
    error = error_of(jail.resolve_for_create, "file.txt/x/y", create_parents=True)
    assert error.code == ExtensionCode.NOT_A_DIRECTORY


def test_create_through_dotdot_below_a_missing_directory(jail: PathJail) -> None:
    error = error_of(jail.resolve_for_create, "missing/../new.txt", create_parents=True)
    assert error.code == NOT_FOUND


def test_create_follows_a_symlink_inside_the_root(jail: PathJail) -> None:
    target = jail.resolve_for_create("link-in", create_parents=False)
    assert target.exists and target.path == os.path.join(jail.root, "file.txt")
    unfollowed = jail.resolve_for_create("link-in", create_parents=False, follow_symlinks=False)
    assert unfollowed.path == os.path.join(jail.root, "link-in")


def test_create_parents_checks_the_lexical_parent(jail: PathJail) -> None:
    # The walk alone would refuse these too; the lexical rule is checked as the spec says.
    error = error_of(jail.resolve_for_create, "../new-dir/x", create_parents=True)
    assert error.code == OUTSIDE


# --- verified descriptors (TOCTOU) ----------------------------------------------


def test_directory_swapped_for_a_symlink_after_resolution_is_refused(
    arena: dict[str, Path], jail: PathJail
) -> None:
    canonical = jail.resolve_existing("sub/inner.txt")
    (arena["outside"] / "inner.txt").write_text("outside copy")
    (arena["root"] / "sub" / "inner.txt").unlink()
    (arena["root"] / "sub").rmdir()
    (arena["root"] / "sub").symlink_to(arena["outside"])
    error = error_of(jail.open_entry, canonical, "sub/inner.txt", os.O_RDONLY)
    assert error.code == OUTSIDE
    assert error.details is not None and error.details["reason"] == "changed_during_operation"


def test_file_swapped_for_a_symlink_after_resolution_is_refused(
    arena: dict[str, Path], jail: PathJail
) -> None:
    canonical = jail.resolve_existing("file.txt")
    (arena["root"] / "file.txt").unlink()
    (arena["root"] / "file.txt").symlink_to(arena["outside"] / "secret.txt")
    assert error_of(jail.open_entry, canonical, "file.txt", os.O_RDONLY).code == OUTSIDE


def _swap_for_link(arena: dict[str, Path], name: str) -> None:
    """Replace the directory `name` in the root by a symlink to the outside tree."""
    os.rename(arena["root"] / name, arena["tmp"] / f"{name}-moved-away")
    (arena["root"] / name).symlink_to(arena["outside"])


def test_working_directory_swapped_before_it_is_opened_is_refused(
    arena: dict[str, Path], jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of EXECUTE_COMMAND, made deterministic: the swap lands right
    after the path was resolved, before the directory is opened."""
    resolve = jail.resolve_directory

    def resolve_then_swap(wire_path: str | None) -> str:
        canonical = resolve(wire_path)
        _swap_for_link(arena, "sub")
        return canonical

    monkeypatch.setattr(jail, "resolve_directory", resolve_then_swap)
    error = error_of(jail.open_working_directory, "sub")
    assert error.code == OUTSIDE
    assert error.details is not None and error.details["reason"] == "changed_during_operation"


def test_a_command_runs_in_the_held_directory_whatever_the_path_becomes(
    arena: dict[str, Path], jail: PathJail
) -> None:
    with jail.working_directory("sub") as cwd:
        assert cwd.startswith("/proc/self/fd/")
        _swap_for_link(arena, "sub")  # after the check, before the child starts
        ran_in = subprocess.run(["pwd", "-P"], cwd=cwd, capture_output=True, text=True, check=True)
    assert ran_in.stdout.strip() == str(arena["tmp"] / "sub-moved-away")


def test_symlink_swapped_back_to_a_directory_mid_walk_is_typed(
    arena: dict[str, Path], jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lstat saw a symlink, readlink then found none (EINVAL): a swap, not an OS failure."""

    def no_longer_a_link(path: str) -> str:
        raise OSError(errno.EINVAL, "Invalid argument", path)

    monkeypatch.setattr(os, "readlink", no_longer_a_link)
    error = error_of(jail.resolve_existing, "link-in")
    assert error.code == OUTSIDE
    assert error.details is not None and error.details["reason"] == "changed_during_operation"


def test_symlink_planted_where_a_parent_will_be_created_is_refused(
    arena: dict[str, Path], jail: PathJail
) -> None:
    target = jail.resolve_for_create("planted/child/new.txt", create_parents=True)
    (arena["root"] / "planted").symlink_to(arena["outside"])
    before = snapshot(arena["outside"])
    assert error_of(jail.open_parent_for_create, target).code == OUTSIDE
    assert snapshot(arena["outside"]) == before


def test_open_parent_for_create_makes_the_missing_directories(jail: PathJail) -> None:
    target = jail.resolve_for_create("x/y/z.txt", create_parents=True)
    fd = jail.open_parent_for_create(target)
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == os.path.join(jail.root, "x", "y")
    finally:
        os.close(fd)


def test_verify_descriptor_refuses_an_outside_descriptor(
    arena: dict[str, Path], jail: PathJail
) -> None:
    fd = os.open(arena["outside"], os.O_RDONLY)
    try:
        assert error_of(jail.verify_descriptor, fd, "x").code == OUTSIDE
    finally:
        os.close(fd)


# --- OS error mapping -----------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "code"),
    [
        (errno.ENOENT, ErrorCode.PATH_NOT_FOUND),
        (errno.EACCES, ExtensionCode.PERMISSION_DENIED),
        (errno.EPERM, ExtensionCode.PERMISSION_DENIED),
        (errno.EROFS, ExtensionCode.PERMISSION_DENIED),
        (errno.ENAMETOOLONG, ExtensionCode.PATH_TOO_LONG),
        (errno.ELOOP, ErrorCode.PATH_NOT_FOUND),
        (errno.ENOTDIR, ExtensionCode.NOT_A_DIRECTORY),
        (errno.EISDIR, ExtensionCode.NOT_A_FILE),
        (errno.EEXIST, ErrorCode.PATH_EXISTS),
        (errno.ENOTEMPTY, ErrorCode.PATH_NOT_EMPTY),
        (errno.EIO, ErrorCode.INTERNAL_ERROR),
        (errno.ENOSPC, ErrorCode.INTERNAL_ERROR),
    ],
)
def test_os_errors_map_to_typed_codes(number: int, code: str) -> None:
    error = protocol_error_from_os_error(OSError(number, os.strerror(number)), "my/file.txt")
    assert error.code == code
    assert error.message.startswith("my/file.txt: ")
    assert error.details == {"path": "my/file.txt", "errno": errno.errorcode[number]}
    if code == ErrorCode.INTERNAL_ERROR:
        assert errno.errorcode[number] in error.message


# --- the attack table -----------------------------------------------------------

LONG_NAME = "n" * 300
LONG_PATH = "/".join(["d" * 200] * 25)

ATTACKS = [
    # `..` sequences
    pytest.param("FILE_READ", {"path": "../outside/secret.txt"}, OUTSIDE, id="read-dotdot"),
    pytest.param(
        "FILE_READ", {"path": "sub/../../outside/secret.txt"}, OUTSIDE, id="read-deep-dotdot"
    ),
    pytest.param("FILE_READ", {"path": "{root}/../outside/secret.txt"}, OUTSIDE, id="read-abs-dd"),
    pytest.param("FILE_READ", {"path": "../../../../../../../../etc/passwd"}, OUTSIDE, id="dd-etc"),
    pytest.param("FILE_READ", {"path": "../root-sibling/secret.txt"}, OUTSIDE, id="read-sibling"),
    pytest.param("FILE_LIST", {"path": ".."}, OUTSIDE, id="list-parent"),
    pytest.param("FILE_STAT", {"path": "../outside/missing"}, OUTSIDE, id="stat-dotdot-missing"),
    # absolute paths elsewhere
    pytest.param("FILE_READ", {"path": "/etc/passwd"}, OUTSIDE, id="read-etc-passwd"),
    pytest.param("FILE_STAT", {"path": "/etc/passwd"}, OUTSIDE, id="stat-etc-passwd"),
    pytest.param("FILE_STAT", {"path": "/nonexistent-tetherbed/x"}, OUTSIDE, id="stat-abs-missing"),
    pytest.param("FILE_LIST", {"path": "/etc"}, OUTSIDE, id="list-etc"),
    pytest.param("FILE_LIST", {"path": "/"}, OUTSIDE, id="list-slash"),
    pytest.param("FILE_READ", {"path": "{outside}/secret.txt"}, OUTSIDE, id="read-abs-outside"),
    pytest.param("FILE_READ", {"path": "{root}-sibling/secret.txt"}, OUTSIDE, id="prefix-sibling"),
    pytest.param(
        "FILE_WRITE", {"path": "{outside}/new.txt", "content": "x"}, OUTSIDE, id="write-abs-outside"
    ),
    pytest.param("FILE_DELETE", {"path": "{outside}/secret.txt"}, OUTSIDE, id="delete-abs"),
    pytest.param(
        "FILE_DELETE",
        {"path": "{outside}/secret.txt", "missing_ok": True},
        OUTSIDE,
        id="delete-abs-missing-ok",
    ),
    # symlinks that lead outside
    pytest.param("FILE_READ", {"path": "link-out-file"}, OUTSIDE, id="read-link-out"),
    pytest.param("FILE_READ", {"path": "link-out-relative"}, OUTSIDE, id="read-link-out-rel"),
    pytest.param("FILE_READ", {"path": "link-out/secret.txt"}, OUTSIDE, id="read-via-dir-link"),
    pytest.param(
        "FILE_WRITE", {"path": "link-out-file", "content": "pwned"}, OUTSIDE, id="write-link-out"
    ),
    pytest.param(
        "FILE_WRITE", {"path": "link-out/new.txt", "content": "x"}, OUTSIDE, id="write-dir-link"
    ),
    pytest.param("FILE_STAT", {"path": "link-out-file"}, OUTSIDE, id="stat-follow-link-out"),
    pytest.param("FILE_STAT", {"path": "link-out/secret.txt"}, OUTSIDE, id="stat-via-dir-link"),
    pytest.param(
        "FILE_STAT",
        {"path": "link-out/secret.txt", "follow_symlinks": False},
        OUTSIDE,
        id="stat-nofollow-via-dir-link",
    ),
    pytest.param("FILE_LIST", {"path": "link-out"}, OUTSIDE, id="list-link-out"),
    pytest.param("FILE_LIST", {"path": "link-out/nested"}, OUTSIDE, id="list-via-link-out"),
    pytest.param(
        "FILE_DELETE", {"path": "link-out/secret.txt"}, OUTSIDE, id="delete-target-via-link"
    ),
    pytest.param(
        "FILE_DELETE",
        {"path": "link-out/nested", "recursive": True},
        OUTSIDE,
        id="delete-tree-via-link",
    ),
    pytest.param(
        "FILE_MOVE", {"src": "file.txt", "dst": "link-out/stolen.txt"}, OUTSIDE, id="move-into"
    ),
    pytest.param(
        "FILE_MOVE",
        {"src": "file.txt", "dst": "link-out/secret.txt", "overwrite": True},
        OUTSIDE,
        id="move-into-overwrite",
    ),
    pytest.param(
        "FILE_MOVE", {"src": "link-out/secret.txt", "dst": "got.txt"}, OUTSIDE, id="move-out"
    ),
    pytest.param(
        "FILE_MOVE", {"src": "../outside/secret.txt", "dst": "got.txt"}, OUTSIDE, id="move-dd-out"
    ),
    pytest.param(
        "FILE_MOVE", {"src": "file.txt", "dst": "../outside/got.txt"}, OUTSIDE, id="move-dd-in"
    ),
    # create_parents through a symlink to outside, or with a lexical parent outside
    pytest.param(
        "FILE_WRITE",
        {"path": "link-out/newdir/x.txt", "content": "x", "create_parents": True},
        OUTSIDE,
        id="create-parents-via-link",
    ),
    pytest.param(
        "FILE_WRITE",
        {"path": "{outside}/newdir/x.txt", "content": "x", "create_parents": True},
        OUTSIDE,
        id="create-parents-lexical-outside",
    ),
    pytest.param(
        "FILE_WRITE",
        {"path": "../outside/newdir/x.txt", "content": "x", "create_parents": True},
        OUTSIDE,
        id="create-parents-dotdot",
    ),
    pytest.param(
        "FILE_WRITE",
        {"path": "/etc/tetherbed-attack/x", "content": "x", "create_parents": True},
        OUTSIDE,
        id="create-parents-etc",
    ),
    # the root itself is never deleted, moved or replaced
    pytest.param("FILE_DELETE", {"path": ".", "recursive": True}, OUTSIDE, id="delete-root"),
    pytest.param(
        "FILE_DELETE", {"path": "{root}", "recursive": True}, OUTSIDE, id="delete-root-abs"
    ),
    pytest.param("FILE_MOVE", {"src": ".", "dst": "sub/root"}, OUTSIDE, id="move-root"),
    pytest.param(
        "FILE_MOVE", {"src": "sub", "dst": ".", "overwrite": True}, OUTSIDE, id="move-over-root"
    ),
    # symlink loops: a clear error, never an escape
    pytest.param("FILE_READ", {"path": "loop-a"}, NOT_FOUND, id="read-loop"),
    pytest.param("FILE_READ", {"path": "self-loop"}, NOT_FOUND, id="read-self-loop"),
    pytest.param("FILE_STAT", {"path": "loop-a"}, NOT_FOUND, id="stat-loop"),
    pytest.param("FILE_LIST", {"path": "loop-a/x"}, NOT_FOUND, id="list-through-loop"),
    pytest.param("FILE_WRITE", {"path": "loop-b", "content": "x"}, NOT_FOUND, id="write-loop"),
    pytest.param(
        "FILE_WRITE",
        {"path": "loop-a/x/y", "content": "x", "create_parents": True},
        NOT_FOUND,
        id="create-parents-through-loop",
    ),
    # NUL bytes
    pytest.param("FILE_READ", {"path": "file\x00.txt"}, INVALID_CHARS, id="read-nul"),
    pytest.param(
        "FILE_WRITE", {"path": "a\x00/../../x", "content": "x"}, INVALID_CHARS, id="write-nul"
    ),
    pytest.param("FILE_STAT", {"path": "\x00"}, INVALID_CHARS, id="stat-nul"),
    pytest.param("FILE_LIST", {"path": "sub\x00"}, INVALID_CHARS, id="list-nul"),
    pytest.param("FILE_DELETE", {"path": "file.txt\x00"}, INVALID_CHARS, id="delete-nul"),
    pytest.param(
        "FILE_MOVE", {"src": "file.txt", "dst": "x\x00y"}, INVALID_CHARS, id="move-dst-nul"
    ),
    # over-long names and paths
    pytest.param("FILE_READ", {"path": LONG_NAME}, TOO_LONG, id="read-long-name"),
    pytest.param("FILE_WRITE", {"path": LONG_NAME, "content": "x"}, TOO_LONG, id="write-long-name"),
    pytest.param("FILE_STAT", {"path": f"sub/{LONG_NAME}"}, TOO_LONG, id="stat-long-name"),
    pytest.param("FILE_DELETE", {"path": LONG_NAME}, TOO_LONG, id="delete-long-name"),
    pytest.param("FILE_MOVE", {"src": "file.txt", "dst": LONG_NAME}, TOO_LONG, id="move-long"),
    pytest.param("FILE_READ", {"path": LONG_PATH}, TOO_LONG, id="read-long-path"),
    pytest.param(
        "FILE_WRITE",
        {"path": LONG_PATH, "content": "x", "create_parents": True},
        TOO_LONG,
        id="write-long-path",
    ),
]


@pytest.mark.parametrize(("kind", "fields", "expected"), ATTACKS)
def test_attack_is_refused_and_changes_nothing(
    arena: dict[str, Path], jail: PathJail, kind: str, fields: dict[str, Any], expected: str
) -> None:
    placeholders = {"root": str(arena["root"]), "outside": str(arena["outside"])}
    request_fields = {
        key: value.format(**placeholders) if isinstance(value, str) else value
        for key, value in fields.items()
    }
    request = PAYLOAD_MODELS[MessageType(kind)](**request_fields)
    _, operation = FILE_OPERATIONS[MessageType(kind)]
    before = {name: snapshot(arena[name]) for name in ("root", "outside", "sibling")}
    outside_top = sorted(os.listdir(arena["tmp"]))

    error = error_of(operation, request, jail, Limits())

    assert error.code == expected, error.message
    assert error.message
    if expected == OUTSIDE:
        assert "outside allowed root" in error.message or "allowed root itself" in error.message
    if expected == NOT_FOUND and "loop" in (error.details or {}).get("reason", ""):
        assert "symbolic links" in error.message
    after = {name: snapshot(arena[name]) for name in ("root", "outside", "sibling")}
    assert after == before
    assert sorted(os.listdir(arena["tmp"])) == outside_top
    assert not os.path.exists("/etc/tetherbed-attack")


def test_loops_report_the_loop(jail: PathJail) -> None:
    error = error_of(jail.resolve_existing, "loop-a")
    assert error.details is not None
    assert error.details == {"path": "loop-a", "errno": "ELOOP", "reason": "symlink_loop"}


def test_outside_is_distinguishable_from_missing(jail: PathJail) -> None:
    assert error_of(jail.resolve_existing, "../outside/none").code == OUTSIDE
    assert error_of(jail.resolve_existing, "link-out/none").code == OUTSIDE
    assert error_of(jail.resolve_existing, "none").code == NOT_FOUND


@pytest.mark.parametrize(
    "wire_path",
    [
        "link-out/nested/../../root/file.txt",
        "link-out/missing/../../root/file.txt",
        "../outside/../root/file.txt",
        "{outside}/nested/../../root/file.txt",
    ],
)
def test_a_walk_that_leaves_the_root_is_refused_even_if_it_comes_back(
    arena: dict[str, Path], jail: PathJail, wire_path: str
) -> None:
    # Refusing at the first step outside means answers never depend on what exists
    # out there, so a request cannot probe the rest of the file system.
    wire_path = wire_path.format(outside=arena["outside"])
    assert error_of(jail.locate, wire_path).code == OUTSIDE
