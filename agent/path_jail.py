"""The path jail: every file operation and command cwd stays inside `allowed_root`.

Wire paths are resolved component by component, the way the kernel does, so the
jail can tell "outside the root" apart from "does not exist" and from "symlink
loop". A walk may pass only through the root, what lies under it, and the root's
ancestors (needed for absolute paths); the moment it steps anywhere else it is
refused, so a request can never probe the rest of the file system.

Resolution alone is a check at one instant. Operations then open the parent
directory, confirm through `/proc/self/fd` where that descriptor really points,
and work relative to it with `O_NOFOLLOW`, so a directory swapped for a symlink
after the check is caught instead of followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tetherbed.agent.reserved_names import is_reserved
from tetherbed.agent.temporaries import TemporaryLedger
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError

#: Linux gives up after 40 symlinks in one lookup (MAXSYMLINKS); so do we.
MAX_SYMLINK_HOPS = 40

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
#: A directory held as an object, not opened for reading (needs only search permission).
_PATH_DIRECTORY_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Location:
    """Where a wire path leads.

    `path` is canonical when `exists`; otherwise it is the canonical deepest
    existing ancestor joined with the missing components, i.e. the
    resolved-but-nonexistent target that FILE_STAT reports.
    """

    path: str
    exists: bool


@dataclass(frozen=True, slots=True)
class CreateTarget:
    """A path about to be created or replaced, checked against the jail.

    `ancestor` is the canonical deepest existing directory, `missing_parents`
    the directories still to create below it, `name` the final component.
    """

    wire_path: str
    path: str
    exists: bool
    ancestor: str
    missing_parents: tuple[str, ...]
    name: str


@dataclass(frozen=True, slots=True)
class _Walk:
    """The raw result of walking a path: how far it got and what was left."""

    reached: str
    missing: tuple[str, ...]
    blocked_by_file: bool


def _components(path: str) -> list[str]:
    """Path components, without the empty and "." ones (trailing slashes are ignored)."""
    return [part for part in path.split("/") if part not in ("", ".")]


def _abbreviated(wire_path: str, keep: int = 80) -> str:
    """A very long path shortened for a message (details carry it whole)."""
    return wire_path if len(wire_path) <= keep else f"{wire_path[:keep]}..."


def _join(directory: str, name: str) -> str:
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


def protocol_error_from_os_error(exc: OSError, wire_path: str) -> ProtocolError:
    """Map an OSError to the typed protocol error a caller can act on."""
    code: ErrorCode | ExtensionCode
    errno_name = errno.errorcode.get(exc.errno or 0, "UNKNOWN")
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno == errno.ENOENT:
        code, text = ErrorCode.PATH_NOT_FOUND, "no such file or directory"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        code, text = ExtensionCode.PERMISSION_DENIED, f"permission denied ({reason})"
    elif exc.errno == errno.ENAMETOOLONG:
        code, text = ExtensionCode.PATH_TOO_LONG, "file name or path too long"
    elif exc.errno == errno.ELOOP:
        code, text = ErrorCode.PATH_NOT_FOUND, "too many levels of symbolic links (a symlink loop)"
    elif exc.errno == errno.ENOTDIR:
        code, text = ExtensionCode.NOT_A_DIRECTORY, "not a directory"
    elif exc.errno == errno.EISDIR:
        code, text = ExtensionCode.NOT_A_FILE, "is a directory"
    elif exc.errno == errno.EEXIST:
        code, text = ErrorCode.PATH_EXISTS, "already exists"
    elif exc.errno == errno.ENOTEMPTY:
        code, text = ErrorCode.PATH_NOT_EMPTY, "directory not empty"
    else:
        code, text = ErrorCode.INTERNAL_ERROR, f"unexpected OS error {errno_name}: {reason}"
    return ProtocolError(
        code, f"{wire_path}: {text}", details={"path": wire_path, "errno": errno_name}
    )


def _swapped_under_us(exc: OSError, dir_fd: int, name: str) -> bool:
    """Whether ENOTDIR from an O_NOFOLLOW|O_DIRECTORY open means a swap, not a file.

    On a symlink that open fails with ENOTDIR (not ELOOP). If the entry is now
    a symlink, a directory again, or gone, what failed was a swap; only a
    non-directory still there is really "not a directory".
    """
    if exc.errno != errno.ENOTDIR:
        return False
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return True
    return stat.S_ISLNK(mode) or stat.S_ISDIR(mode)


@contextmanager
def os_errors_as_protocol_errors(wire_path: str) -> Iterator[None]:
    """Turn any OSError raised in the block into a typed ProtocolError naming `wire_path`."""
    try:
        yield
    except OSError as exc:
        raise protocol_error_from_os_error(exc, wire_path) from exc


def symlink_loop_error(wire_path: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.PATH_NOT_FOUND,
        f"{wire_path}: too many levels of symbolic links (a symlink loop)",
        details={"path": wire_path, "errno": "ELOOP", "reason": "symlink_loop"},
    )


class PathJail:
    """Resolves wire paths inside one allowed root and refuses everything else.

    Immutable after construction, so one jail may serve concurrent worker threads.
    """

    #: Whether a name to be created is a Windows device name (PATH_RESERVED_NAME);
    #: a planted defect swaps it for one that accepts them all.
    reserved_name = staticmethod(is_reserved)

    def __init__(self, root: str, *, temporaries: TemporaryLedger | None = None) -> None:
        """`temporaries` records the temporary files operations create in the tree
        (see agent/temporaries.py); by default nothing is recorded."""
        canonical = os.path.realpath(root)
        if not os.path.exists(canonical):
            raise FileNotFoundError(errno.ENOENT, "allowed root does not exist", root)
        if not os.path.isdir(canonical):
            raise NotADirectoryError(errno.ENOTDIR, "allowed root is not a directory", root)
        self.root = canonical
        self._name_max = os.pathconf(canonical, "PC_NAME_MAX")
        self._path_max = os.pathconf(canonical, "PC_PATH_MAX")
        self._can_verify_descriptors = os.path.isdir("/proc/self/fd")
        self.temporaries = temporaries or TemporaryLedger(None)

    # --- membership ----------------------------------------------------------

    def contains(self, canonical_path: str) -> bool:
        """Whether a canonical path is the root or lies below it."""
        if self.root == "/":
            return canonical_path.startswith("/")
        return canonical_path == self.root or canonical_path.startswith(self.root + "/")

    def _is_on_route(self, canonical_path: str) -> bool:
        """Inside the root, or one of its ancestors (a walk may pass through those)."""
        if self.contains(canonical_path):
            return True
        return canonical_path == "/" or self.root.startswith(canonical_path + "/")

    def outside_error(self, wire_path: str, reason: str = "outside") -> ProtocolError:
        return ProtocolError(
            ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT,
            f"Path {wire_path} is outside allowed root {self.root}",
            details={"path": wire_path, "allowed_root": self.root, "reason": reason},
        )

    def changed_error(self, wire_path: str) -> ProtocolError:
        """A path that changed between its check and its use (a swap was caught)."""
        return ProtocolError(
            ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT,
            f"Path {wire_path} changed while in use (a symlink was swapped in); "
            f"refused rather than followed out of {self.root}",
            details={
                "path": wire_path,
                "allowed_root": self.root,
                "reason": "changed_during_operation",
            },
        )

    def root_refusal(self, wire_path: str, action: str) -> ProtocolError:
        """The root itself may be read and listed but never deleted, moved or replaced."""
        return ProtocolError(
            ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT,
            f"Path {wire_path} is the allowed root itself, which cannot be {action}",
            details={"path": wire_path, "allowed_root": self.root, "reason": "allowed_root"},
        )

    # --- validation and walking ---------------------------------------------

    def _absolute(self, wire_path: str) -> str:
        return wire_path if wire_path.startswith("/") else _join(self.root, wire_path)

    def _validate(self, wire_path: str) -> None:
        """Refuse what the kernel would refuse, before touching the file system."""
        if wire_path == "":
            raise ProtocolError(
                ExtensionCode.INVALID_MESSAGE, "path is empty", details={"path": wire_path}
            )
        if "\x00" in wire_path:
            raise ProtocolError(
                ErrorCode.PATH_INVALID_CHARS,
                f"{wire_path!r}: path contains a NUL byte",
                details={"path": wire_path},
            )
        try:
            encoded = os.fsencode(self._absolute(wire_path))
        except UnicodeEncodeError as exc:
            raise ProtocolError(
                ErrorCode.PATH_INVALID_CHARS,
                f"{wire_path!r}: path is not encodable for this file system",
                details={"path": wire_path},
            ) from exc
        if len(encoded) >= self._path_max:
            raise ProtocolError(
                ExtensionCode.PATH_TOO_LONG,
                f"{_abbreviated(wire_path)}: path is {len(encoded)} bytes, "
                f"the limit is {self._path_max - 1}",
                details={"path": wire_path, "limit": self._path_max - 1},
            )
        for part in encoded.split(b"/"):
            if len(part) > self._name_max:
                raise ProtocolError(
                    ExtensionCode.PATH_TOO_LONG,
                    f"{_abbreviated(wire_path)}: a name is {len(part)} bytes, "
                    f"the limit is {self._name_max}",
                    details={"path": wire_path, "limit": self._name_max},
                )

    def _walk(self, wire_path: str, *, follow_final: bool) -> _Walk:
        """Resolve like the kernel does, refusing any step off the root's route."""
        absolute = self._absolute(wire_path)
        if absolute.startswith(self.root + "/") or absolute == self.root:
            # The root is canonical, so starting there skips re-walking its ancestors.
            reached, pending = self.root, deque(_components(absolute[len(self.root) :]))
        else:
            reached, pending = "/", deque(_components(absolute))
        hops = 0
        while pending:
            name = pending.popleft()
            if name == "..":
                reached = os.path.dirname(reached)
                if not self._is_on_route(reached):
                    raise self.outside_error(wire_path)
                continue
            candidate = _join(reached, name)
            try:
                status = os.lstat(candidate)
            except FileNotFoundError:
                return _Walk(reached, (name, *pending), blocked_by_file=False)
            if stat.S_ISLNK(status.st_mode) and (pending or follow_final):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise symlink_loop_error(wire_path)
                try:
                    target = os.readlink(candidate)
                except OSError as exc:
                    if exc.errno == errno.EINVAL:  # no longer a symlink: swapped under us
                        raise self.changed_error(wire_path) from exc
                    raise
                if target.startswith("/"):
                    reached = "/"
                pending.extendleft(reversed(_components(target)))
                continue
            if pending and not stat.S_ISDIR(status.st_mode):
                return _Walk(candidate, tuple(pending), blocked_by_file=True)
            reached = candidate
            if not self._is_on_route(reached):
                raise self.outside_error(wire_path)
        return _Walk(reached, (), blocked_by_file=False)

    # --- resolution ----------------------------------------------------------

    def locate(self, wire_path: str, *, follow_symlinks: bool = True) -> Location:
        """Canonical location of a wire path, existing or not; refuses jail escapes.

        Raises PATH_OUTSIDE_ALLOWED_ROOT (never "missing") for anything outside,
        and PATH_NOT_FOUND with reason symlink_loop for loops.
        """
        self._validate(wire_path)
        with os_errors_as_protocol_errors(wire_path):
            walk = self._walk(wire_path, follow_final=follow_symlinks)
        target = os.path.normpath(os.path.join(walk.reached, *walk.missing))
        if not self.contains(target) or not self.contains(walk.reached):
            raise self.outside_error(wire_path)
        return Location(path=target, exists=not walk.missing)

    def resolve_existing(self, wire_path: str, *, follow_symlinks: bool = True) -> str:
        """Canonical path of an existing entry; PATH_NOT_FOUND when there is none."""
        location = self.locate(wire_path, follow_symlinks=follow_symlinks)
        if not location.exists:
            raise ProtocolError(
                ErrorCode.PATH_NOT_FOUND,
                f"{wire_path}: no such file or directory",
                details={"path": wire_path},
            )
        return location.path

    def resolve_directory(self, wire_path: str | None) -> str:
        """Canonical path of an existing directory (a command's cwd); None means the root."""
        if wire_path is None:
            return self.root
        path = self.resolve_existing(wire_path)
        if not os.path.isdir(path):
            raise ProtocolError(
                ExtensionCode.NOT_A_DIRECTORY,
                f"{wire_path}: not a directory",
                details={"path": wire_path},
            )
        return path

    def resolve_for_create(
        self, wire_path: str, *, create_parents: bool, follow_symlinks: bool = True
    ) -> CreateTarget:
        """Check a path that is about to be created or replaced.

        With missing parents, both the canonical nearest existing ancestor and the
        lexical parent must be inside the root (the spec's create_parents rule);
        without `create_parents`, a missing parent is PATH_NOT_FOUND.
        """
        self._validate(wire_path)
        with os_errors_as_protocol_errors(wire_path):
            walk = self._walk(wire_path, follow_final=follow_symlinks)
        target = os.path.normpath(os.path.join(walk.reached, *walk.missing))
        if not self.contains(walk.reached) or not self.contains(target):
            raise self.outside_error(wire_path)
        if walk.blocked_by_file:
            raise ProtocolError(
                ExtensionCode.NOT_A_DIRECTORY,
                f"{wire_path}: a parent component is not a directory",
                details={"path": wire_path},
            )
        for component in (*walk.missing, os.path.basename(target)):
            if self.reserved_name(component):
                raise ProtocolError(
                    ErrorCode.PATH_RESERVED_NAME,
                    f"{wire_path}: {component!r} is a reserved device name on Windows "
                    "(CON, PRN, AUX, NUL, COM1-9, LPT1-9); files are never created with one",
                    details={"path": wire_path, "name": component},
                )
        if not walk.missing:
            return CreateTarget(
                wire_path=wire_path,
                path=walk.reached,
                exists=True,
                ancestor=os.path.dirname(walk.reached),
                missing_parents=(),
                name=os.path.basename(walk.reached),
            )
        *parents, name = walk.missing
        if ".." in walk.missing:
            raise ProtocolError(
                ErrorCode.PATH_NOT_FOUND,
                f"{wire_path}: '..' below a directory that does not exist",
                details={"path": wire_path},
            )
        if parents:
            lexical_parent = os.path.dirname(os.path.normpath(self._absolute(wire_path)))
            if not self.contains(lexical_parent):
                raise self.outside_error(wire_path, reason="lexical_parent_outside")
            if not create_parents:
                raise ProtocolError(
                    ErrorCode.PATH_NOT_FOUND,
                    f"{wire_path}: parent directory does not exist (create_parents is false)",
                    details={"path": wire_path},
                )
        return CreateTarget(
            wire_path=wire_path,
            path=target,
            exists=False,
            ancestor=walk.reached,
            missing_parents=tuple(parents),
            name=name,
        )

    # --- verified descriptors --------------------------------------------------

    def verify_descriptor(self, fd: int, wire_path: str) -> None:
        """Confirm where an open descriptor really is; refuse it if it left the root."""
        if not self._can_verify_descriptors:
            return
        real = os.readlink(f"/proc/self/fd/{fd}")
        if real.endswith(" (deleted)"):
            real = real[: -len(" (deleted)")]
        if not self.contains(real):
            raise self.changed_error(wire_path)

    def _checked(self, fd: int, wire_path: str) -> int:
        try:
            self.verify_descriptor(fd, wire_path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_working_directory(self, wire_path: str | None) -> int:
        """An O_PATH descriptor of the existing directory `wire_path` (None: the root).

        The path is resolved as usual, then opened again from the root one
        component at a time with O_NOFOLLOW, so what is opened is exactly what
        was checked: a component swapped for a symlink (or a file) meanwhile is
        refused (`changed_during_operation`), never followed. A command started
        in this descriptor (`working_directory`) runs in the checked directory
        even if the path is swapped after this returns.
        """
        canonical = self.resolve_directory(wire_path)
        shown = self.root if wire_path is None else wire_path
        fd = os.open(self.root, _PATH_DIRECTORY_FLAGS)
        try:
            for name in _components(canonical[len(self.root) :]):
                try:
                    child = os.open(name, _PATH_DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except NotADirectoryError as exc:
                    raise self.changed_error(shown) from exc
                except OSError as exc:
                    raise protocol_error_from_os_error(exc, shown) from exc
                os.close(fd)
                fd = child
            self.verify_descriptor(fd, shown)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextmanager
    def working_directory(self, wire_path: str | None) -> Iterator[str]:
        """Hold `wire_path`'s directory open; yields a path naming the held object.

        The path is `/proc/self/fd/N`: the kernel resolves it to the open
        directory itself, in whichever process resolves it (a child inherits N
        until it execs, and chdir happens before exec), so it cannot be
        swapped. Only without procfs is it the canonical path, checked but not
        held.
        """
        fd = self.open_working_directory(wire_path)
        try:
            if self._can_verify_descriptors:
                yield f"/proc/self/fd/{fd}"
            else:
                yield self.resolve_directory(wire_path)
        finally:
            os.close(fd)

    def open_directory(self, canonical_dir: str, wire_path: str) -> int:
        """A descriptor of a directory inside the root, verified after opening."""
        with os_errors_as_protocol_errors(wire_path):
            fd = os.open(canonical_dir, _DIRECTORY_FLAGS)
        return self._checked(fd, wire_path)

    @contextmanager
    def opened_parent(self, canonical_path: str, wire_path: str) -> Iterator[tuple[int, str]]:
        """A verified descriptor of the entry's parent directory, and the entry's name."""
        if canonical_path == self.root or not self.contains(canonical_path):
            raise self.root_refusal(wire_path, "deleted, moved or replaced")
        fd = self.open_directory(os.path.dirname(canonical_path), wire_path)
        try:
            yield fd, os.path.basename(canonical_path)
        finally:
            os.close(fd)

    def open_entry(self, canonical_path: str, wire_path: str, flags: int) -> int:
        """Open an entry inside the root without following a final symlink; verified.

        A final component that became a symlink after resolution is refused as a
        jail violation rather than followed.
        """
        flags |= os.O_CLOEXEC | os.O_NOFOLLOW
        if canonical_path == self.root:
            with os_errors_as_protocol_errors(wire_path):
                fd = os.open(self.root, flags)
            return self._checked(fd, wire_path)
        with self.opened_parent(canonical_path, wire_path) as (parent_fd, name):
            try:
                fd = os.open(name, flags, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP or _swapped_under_us(exc, parent_fd, name):
                    raise self.changed_error(wire_path) from exc
                raise protocol_error_from_os_error(exc, wire_path) from exc
        return self._checked(fd, wire_path)

    def lstat_entry(self, canonical_path: str, wire_path: str) -> os.stat_result:
        """lstat an entry inside the root through its verified parent directory."""
        if canonical_path == self.root:
            fd = self.open_directory(self.root, wire_path)
            try:
                return os.fstat(fd)
            finally:
                os.close(fd)
        with (
            self.opened_parent(canonical_path, wire_path) as (parent_fd, name),
            os_errors_as_protocol_errors(wire_path),
        ):
            return os.stat(name, dir_fd=parent_fd, follow_symlinks=False)

    def lstat_resolved(self, canonical_path: str, wire_path: str) -> os.stat_result:
        """lstat a path resolved with links followed: a symlink there now was swapped in."""
        status = self.lstat_entry(canonical_path, wire_path)
        if stat.S_ISLNK(status.st_mode):
            raise self.changed_error(wire_path)
        return status

    def open_parent_for_create(self, target: CreateTarget) -> int:
        """A verified descriptor of the target's parent, creating missing parents first.

        Each new directory is made and opened relative to its verified parent with
        O_NOFOLLOW, so a symlink planted mid-way is refused, never followed.
        """
        fd = self.open_directory(target.ancestor, target.wire_path)
        try:
            for name in target.missing_parents:
                with os_errors_as_protocol_errors(target.wire_path):
                    try:
                        os.mkdir(name, dir_fd=fd)
                    except FileExistsError:
                        pass  # created concurrently; opening with O_NOFOLLOW checks it
                    try:
                        child = os.open(name, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                    except NotADirectoryError as exc:
                        raise self.changed_error(target.wire_path) from exc
                os.close(fd)
                fd = child
                self.verify_descriptor(fd, target.wire_path)
        except BaseException:
            os.close(fd)
            raise
        return fd
