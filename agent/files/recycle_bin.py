"""FILE_DELETE's recycle-bin mode (`tetherbed agent --recycle-bin DIR`).

The spec's shim may move deleted entries to a trash folder instead of
unlinking them. The bin follows the freedesktop.org Trash layout, so desktop
file managers and `gio trash --restore` understand it: the entry goes to
`DIR/files/NAME` and its restore record to `DIR/info/NAME.trashinfo`:

    [Trash Info]
    Path=/home/alice/work/old%20data.csv
    DeletionDate=2025-01-31T09:30:00

NAME is the entry's own name, or `NAME.2`, `NAME.3`, ... when taken. Two
deletes can never take one name: the `.trashinfo` is created first with
O_EXCL (it reserves the name), and the entry is renamed without replacing
(renameat2 RENAME_NOREPLACE). The record is written and fsync'ed before the
entry moves, so an entry in the bin always has its way back. On another file
system the entry is copied beside its final name and renamed into place
before the original is removed, so a crash loses nothing.

The bin must lie outside the allowed root: the platform deleted those files
and must not see them again through FILE_LIST.
"""

from __future__ import annotations

import errno
import itertools
import os
import time
import urllib.parse

from tetherbed.agent.files.cross_device import move_across_devices
from tetherbed.agent.files.rename import rename_entry
from tetherbed.agent.temporaries import TemporaryLedger
from tetherbed.runtime.clock import Clock

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_INFO_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
INFO_SUFFIX = ".trashinfo"
#: Names are cut to this many bytes so that NAME.n.trashinfo fits NAME_MAX (255).
_NAME_BYTES = 200
#: Give up finding a free name after this many tries (a bin under attack).
_MAX_TRIES = 10_000


class RecycleBinError(ValueError):
    """The bin cannot be used as configured (the message says why)."""


class RecycleBin:
    def __init__(self, directory: str, *, root: str, clock: Clock) -> None:
        canonical = os.path.realpath(directory)
        root = os.path.realpath(root)
        if canonical == root or canonical.startswith(root.rstrip("/") + "/"):
            raise RecycleBinError(
                f"--recycle-bin {directory} is inside the allowed root {root}: "
                "what the platform deleted would still be listed"
            )
        for sub in ("files", "info"):
            os.makedirs(os.path.join(canonical, sub), mode=0o700, exist_ok=True)
        self.directory = canonical
        self.files = os.path.join(canonical, "files")
        self.info = os.path.join(canonical, "info")
        self._clock = clock

    def discard(
        self, dir_fd: int, name: str, original: str, ledger: TemporaryLedger | None = None
    ) -> str:
        """Move the entry `name` of `dir_fd` (canonically `original`) into the bin;
        returns the name it has there."""
        files = os.open(self.files, _DIRECTORY_FLAGS)
        info = os.open(self.info, _DIRECTORY_FLAGS)
        try:
            for number in itertools.count(1):
                if number > _MAX_TRIES:
                    raise OSError(errno.EEXIST, "no free name in the recycle bin", self.files)
                candidate = _candidate(name, number)
                if not self._reserve(info, candidate, original):
                    continue
                try:
                    self._move(dir_fd, name, files, candidate, ledger)
                except FileExistsError:
                    os.unlink(candidate + INFO_SUFFIX, dir_fd=info)  # stale entry: next name
                    continue
                except BaseException:
                    os.unlink(candidate + INFO_SUFFIX, dir_fd=info)
                    raise
                return candidate
        finally:
            os.close(files)
            os.close(info)
        raise AssertionError("unreachable")

    def _reserve(self, info: int, candidate: str, original: str) -> bool:
        """Create the restore record, which claims the name; False when taken."""
        try:
            fd = os.open(candidate + INFO_SUFFIX, _INFO_FLAGS, 0o600, dir_fd=info)
        except FileExistsError:
            return False
        try:
            os.write(fd, self.record(original).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def record(self, original: str) -> str:
        """The .trashinfo text: where the entry was, and when it was deleted."""
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self._clock.time()))
        path = urllib.parse.quote(original, safe="/")
        return f"[Trash Info]\nPath={path}\nDeletionDate={when}\n"

    def _move(
        self, dir_fd: int, name: str, files: int, candidate: str, ledger: TemporaryLedger | None
    ) -> None:
        try:
            rename_entry(dir_fd, name, files, candidate, replace=False)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            move_across_devices(
                dir_fd,
                name,
                files,
                candidate,
                replace=False,
                dst_directory=self.files,
                ledger=ledger or TemporaryLedger(None),
            )


def _candidate(name: str, number: int) -> str:
    encoded = os.fsencode(name)
    if len(encoded) > _NAME_BYTES:
        name = os.fsdecode(encoded[:_NAME_BYTES].decode("utf-8", "ignore").encode())
    return name if number == 1 else f"{name}.{number}"
