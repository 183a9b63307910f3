"""DIRECTORY_LIST_REQUEST: the platform walks real folders without naming a path.

The platform only ever holds opaque, host-minted random strings: a browse id,
directory references and page cursors. Each maps to state kept here, is valid
only inside its browse, and dies with the browse (five minutes after it
started, when ATTACH_SESSION consumes it, or when the control connection
reconnects and `invalidate_all()` runs). Nothing the platform sends is ever
interpreted as a path, so there is nothing to traverse or inject.

A reference names one directory *object*: it remembers the (st_dev, st_ino)
seen when it was minted, and using it after the folder was replaced (or turned
into a symlink, or became unreadable) is DIRECTORY_UNAVAILABLE.

Bounds (spec): 200 directories per page; 1,000 directory entries scanned per
browse in total (every entry counts, files included); `truncated` only when
that bound left entries out. Memory is bounded too: at most MAX_BROWSES live
browses per connection (the oldest is evicted), MAX_REFS_PER_BROWSE references
per browse, and at most one cursor per page of a listing.

Thread use: `list_directory` and `selected` do blocking file system calls and
may run in a worker thread, one at a time (the controller serialises control
requests). `invalidate_all` may run concurrently on the event loop: it only
rebinds the browse table, so an in-flight listing ends up minting references
into a browse that no longer exists, which then fail closed.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tetherbed.agent.control import fingerprint as fp
from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import DirectoryEntry, DirectoryListRequest, DirectoryListResponse

log = logging.getLogger(__name__)

BROWSE_TTL_SECONDS = 300.0
PAGE_SIZE = 200
SCAN_LIMIT = 1000
#: Configured roots beyond this are left out (and the roots page says truncated).
MAX_ROOTS = 32
#: Every scanned entry can yield one reference, plus the roots and their parents.
MAX_REFS_PER_BROWSE = SCAN_LIMIT + 2 * MAX_ROOTS
MAX_BROWSES = 16
#: Host tokens are 22 characters; anything much longer is refused unread.
MAX_TOKEN_CHARS = 64
#: Pseudo file systems that are never offered, even under a configured root.
SPECIAL_DIRECTORIES = frozenset({"/proc", "/sys", "/dev"})
HOME_NAME = "Home"

_OPEN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Identity = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Selection:
    """The directory chosen by ATTACH_SESSION, strictly re-resolved."""

    path: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class _Directory:
    path: str
    name: str
    identity: Identity


@dataclass(slots=True)
class _Listing:
    """One scan of one directory; its pages are served from this snapshot."""

    directory: _Directory
    children: list[_Directory]
    truncated: bool
    cursors: dict[int, str] = field(default_factory=dict)  # offset -> cursor


@dataclass(slots=True)
class _Cursor:
    listing: _Listing
    offset: int


@dataclass(slots=True)
class _Browse:
    browse_id: str
    deadline: float  # monotonic
    expires_at: float  # wall time, as reported
    roots: list[str]
    refs: dict[str, _Directory] = field(default_factory=dict)
    ref_of: dict[tuple[str, Identity], str] = field(default_factory=dict)
    cursors: dict[str, _Cursor] = field(default_factory=dict)
    scanned: int = 0


def random_token() -> str:
    """An unguessable host token (128 bits, base64url, 22 characters)."""
    return secrets.token_urlsafe(16)


class Browser:
    """Browses under the configured roots (default: the user's home)."""

    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]] | None,
        clock: Clock,
        *,
        new_token: Callable[[], str] = random_token,
    ) -> None:
        self._roots = [os.fspath(root) for root in roots] if roots else [str(Path.home())]
        self._clock = clock
        self._new_token = new_token
        self._browses: dict[str, _Browse] = {}

    # --- the request ---------------------------------------------------------

    def list_directory(self, request: DirectoryListRequest) -> DirectoryListResponse:
        """Answer one DIRECTORY_LIST_REQUEST (raises ProtocolError)."""
        if request.browse_id is None and request.directory_ref is None:
            if request.cursor is not None:
                raise _invalid("a cursor needs its browse_id and directory_ref")
            return self._start()
        if request.browse_id is None or request.directory_ref is None:
            raise _invalid("browse_id and directory_ref must both be set, or both be null")
        browse = self._browse(request.browse_id)
        directory = self._directory(browse, request.directory_ref)
        if request.cursor is None:
            _check_unchanged(directory)
            budget = SCAN_LIMIT - browse.scanned
            children, scanned, truncated = _scan(directory, budget)
            browse.scanned += scanned
            return self._page(browse, _Listing(directory, children, truncated), 0)
        cursor = browse.cursors.get(request.cursor) if _plausible(request.cursor) else None
        if cursor is None or cursor.listing.directory != directory:
            raise _invalid("cursor does not belong to this browse and directory")
        _check_unchanged(directory)
        return self._page(browse, cursor.listing, cursor.offset)

    # --- used by ATTACH_SESSION and the connection ---------------------------

    def selected(self, browse_id: str, directory_ref: str) -> Selection:
        """The directory a reference names, strictly re-resolved and fingerprinted.

        Does not consume the browse: call `consume` once the attach succeeded.
        """
        directory = self._directory(self._browse(browse_id), directory_ref)
        info = _check_unchanged(directory)
        return Selection(directory.path, fp.compute(directory.path, info))

    def consume(self, browse_id: str) -> None:
        """End a browse: every reference and cursor of it becomes invalid."""
        self._browses.pop(browse_id, None)

    def invalidate_all(self) -> None:
        """Kill every browse; called whenever the control connection (re)connects."""
        self._browses = {}

    @property
    def live_browses(self) -> int:
        return len(self._browses)

    # --- internals -----------------------------------------------------------

    def _start(self) -> DirectoryListResponse:
        now = self._clock.monotonic()
        self._browses = {k: b for k, b in self._browses.items() if b.deadline > now}
        while len(self._browses) >= MAX_BROWSES:
            del self._browses[next(iter(self._browses))]  # oldest first
        roots, truncated = self._virtual_roots()
        browse = _Browse(
            browse_id=self._new_token(),
            deadline=now + BROWSE_TTL_SECONDS,
            expires_at=self._clock.time() + BROWSE_TTL_SECONDS,
            roots=[root.path for root in roots],
        )
        self._browses[browse.browse_id] = browse
        entries = [self._entry(browse, root) for root in roots]
        return DirectoryListResponse(
            browse_id=browse.browse_id,
            current=None,
            parent_ref=None,
            entries=[entry for entry in entries if entry is not None],
            next_cursor=None,
            truncated=truncated,
            expires_at=browse.expires_at,
        )

    def _virtual_roots(self) -> tuple[list[_Directory], bool]:
        """The configured roots that are real directories now, canonical, deduplicated."""
        home = os.path.realpath(Path.home())
        roots: list[_Directory] = []
        seen: set[str] = set()
        for configured in self._roots:
            path = os.path.realpath(configured)
            if path in seen or path in SPECIAL_DIRECTORIES:
                continue
            try:
                info = fp.resolve_directory(path)
            except ProtocolError as exc:
                log.info("browse root %s skipped: %s", configured, exc.message)
                continue
            if len(roots) == MAX_ROOTS:
                return roots, True
            seen.add(path)
            name = HOME_NAME if path == home else (os.path.basename(path) or path)
            roots.append(_Directory(path, name, (info.st_dev, info.st_ino)))
        return roots, False

    def _page(self, browse: _Browse, listing: _Listing, offset: int) -> DirectoryListResponse:
        directory = listing.directory
        truncated = listing.truncated
        entries: list[DirectoryEntry] = []
        out_of_refs = False
        for child in listing.children[offset : offset + PAGE_SIZE]:
            entry = self._entry(browse, child)
            if entry is None:
                truncated = out_of_refs = True
                break
            entries.append(entry)
        next_cursor = None
        following = offset + PAGE_SIZE
        if following < len(listing.children) and not out_of_refs:
            next_cursor = listing.cursors.get(following)
            if next_cursor is None:
                next_cursor = self._new_token()
                listing.cursors[following] = next_cursor
                browse.cursors[next_cursor] = _Cursor(listing, following)
        current = self._entry(browse, directory)
        return DirectoryListResponse(
            browse_id=browse.browse_id,
            current=current,
            parent_ref=self._parent_ref(browse, directory),
            entries=entries,
            next_cursor=next_cursor,
            truncated=truncated,
            expires_at=browse.expires_at,
        )

    def _parent_ref(self, browse: _Browse, directory: _Directory) -> str | None:
        parent = os.path.dirname(directory.path)
        if parent == directory.path or not any(_within(parent, r) for r in browse.roots):
            return None
        try:
            info = os.lstat(parent)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        name = os.path.basename(parent) or parent
        return self._mint(browse, _Directory(parent, name, (info.st_dev, info.st_ino)))

    def _entry(self, browse: _Browse, directory: _Directory) -> DirectoryEntry | None:
        ref = self._mint(browse, directory)
        if ref is None:
            return None
        return DirectoryEntry(directory_ref=ref, name=directory.name, path=directory.path)

    def _mint(self, browse: _Browse, directory: _Directory) -> str | None:
        """The browse's reference to `directory`: reused if it has one, else new
        (None once the browse holds MAX_REFS_PER_BROWSE references)."""
        key = (directory.path, directory.identity)
        ref = browse.ref_of.get(key)
        if ref is not None:
            return ref
        if len(browse.refs) >= MAX_REFS_PER_BROWSE:
            return None
        ref = self._new_token()
        browse.refs[ref] = directory
        browse.ref_of[key] = ref
        return ref

    def _browse(self, browse_id: str) -> _Browse:
        browse = self._browses.get(browse_id) if _plausible(browse_id) else None
        if browse is None:
            raise _invalid(
                "unknown browse_id (expired, consumed, or from an earlier control connection)"
            )
        if self._clock.monotonic() >= browse.deadline:
            self._browses.pop(browse_id, None)
            raise _invalid("browse expired (browses last five minutes)")
        return browse

    def _directory(self, browse: _Browse, directory_ref: str) -> _Directory:
        directory = browse.refs.get(directory_ref) if _plausible(directory_ref) else None
        if directory is None:
            raise _invalid("directory_ref does not belong to this browse")
        return directory


def _scan(directory: _Directory, budget: int) -> tuple[list[_Directory], int, bool]:
    """The real subdirectories of `directory`, reading at most `budget` entries.

    Returns (children sorted by name, entries read, whether entries were left out).
    """
    fd = _open(directory)
    children: list[_Directory] = []
    scanned = 0
    truncated = False
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if scanned >= budget:
                    truncated = True
                    break
                scanned += 1
                child = _real_subdirectory(directory.path, entry, fd)
                if child is not None:
                    children.append(child)
    except OSError as exc:
        raise _unavailable(directory.path, f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    children.sort(key=lambda child: (child.name.casefold(), child.name))
    return children, scanned, truncated


def _real_subdirectory(parent: str, entry: os.DirEntry[str], dir_fd: int) -> _Directory | None:
    """The entry as a listable directory, or None for files, symlinks, special
    files, pseudo file systems, names that are not UTF-8, and entries that
    vanished or are inaccessible."""
    try:
        entry.name.encode("utf-8")
    except UnicodeEncodeError:
        return None
    try:
        if not entry.is_dir(follow_symlinks=False):  # cheap d_type check first
            return None
        info = os.stat(entry.name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    path = os.path.join(parent, entry.name)
    if path in SPECIAL_DIRECTORIES or not accessible(entry.name, dir_fd):
        return None
    return _Directory(path, entry.name, (info.st_dev, info.st_ino))


def accessible(name: str, dir_fd: int) -> bool:
    """Whether this process may list and enter the directory `name` under `dir_fd`."""
    try:
        return os.access(name, os.R_OK | os.X_OK, dir_fd=dir_fd)
    except OSError:
        return False


def _check_unchanged(directory: _Directory) -> os.stat_result:
    """Strict re-resolution, and the same directory object the reference named."""
    info = fp.resolve_directory(directory.path)
    if (info.st_dev, info.st_ino) != directory.identity:
        raise _unavailable(directory.path, "was replaced since it was listed")
    return info


def _open(directory: _Directory) -> int:
    """A descriptor for the directory, refusing a last-moment swap for a symlink."""
    try:
        fd = os.open(directory.path, _OPEN_FLAGS)
    except OSError as exc:
        raise _unavailable(directory.path, f"cannot be opened ({exc.strerror})") from None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != directory.identity:
        os.close(fd)
        raise _unavailable(directory.path, "was replaced since it was listed")
    return fd


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _plausible(token: object) -> bool:
    return isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_CHARS


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.DIRECTORY_REFERENCE_INVALID, reason)


def _unavailable(path: str, why: str) -> ProtocolError:
    return ProtocolError(ErrorCode.DIRECTORY_UNAVAILABLE, f"directory {path} {why}")
