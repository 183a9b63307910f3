"""A thread that keeps swapping a directory of the root for a symlink to outside.

While it runs, `root/swap` is now a real directory holding `file.txt`, now a
symlink to the sentinel — the time-of-check to time-of-use race a jail must
survive: an operation that checked `swap/...` while it was a directory must
not then follow the link. The two entries trade places atomically
(renameat2 with RENAME_EXCHANGE), so `swap` always exists and is each kind
about half the time; where the kernel lacks the call, two renames do it (and
`swap` is briefly missing). Operations may move or delete what it swaps; it
rebuilds what it needs and carries on.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from tetherbed.simulator.fuzz.paths.arena import PARKED, ROOT_FILE, SWAP, Arena

#: renameat2 flag: atomically exchange the two names (Linux 3.15+).
RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _load_exchange() -> Callable[[str, str], bool] | None:
    """`exchange(a, b)`: True when swapped, False when either name is missing."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    renameat2.restype = ctypes.c_int

    def exchange(first: str, second: str) -> bool:
        result = renameat2(
            _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE
        )
        if result == 0:
            return True
        error = ctypes.get_errno()
        if error == errno.ENOENT:
            return False
        raise OSError(error, os.strerror(error), first)

    return exchange


class SymlinkSwapper:
    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.swaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="symlink-swapper", daemon=True)
        self._exchange = _load_exchange()

    def __enter__(self) -> SymlinkSwapper:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        root = self.arena.root
        swap, parked = root / SWAP, root / PARKED
        exchange = self._exchange
        while not self._stop.is_set():
            try:
                if exchange is not None:
                    if not exchange(str(swap), str(parked)):
                        self._rebuild(swap, parked)
                        continue
                else:
                    self._two_renames(swap, parked)
                self.swaps += 1
            except OSError as exc:
                if exc.errno in (errno.ENOSYS, errno.EINVAL):
                    exchange = None  # the file system cannot exchange: rename twice
                continue  # an operation moved or removed something meanwhile

    def _rebuild(self, swap: Path, parked: Path) -> None:
        """Put back whichever of the pair an operation took away."""
        if not os.path.lexists(swap):
            _make_directory(swap)
        if not os.path.lexists(parked):
            parked.symlink_to(self.arena.outside)

    def _two_renames(self, swap: Path, parked: Path) -> None:
        if swap.is_symlink():
            swap.unlink()
            _make_directory(parked)
            os.rename(parked, swap)
        else:
            if parked.is_symlink():
                parked.unlink()
            if os.path.lexists(swap):
                os.rename(swap, parked)
            swap.symlink_to(self.arena.outside)


def _make_directory(path: Path) -> None:
    """`path` as a directory holding `file.txt`, written without following any
    link an operation may have put there meanwhile."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    if not path.is_dir():
        path.mkdir()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        file_fd = os.open(ROOT_FILE, flags, 0o644, dir_fd=fd)
        os.write(file_fd, b"swap inside\n")
        os.close(file_fd)
    finally:
        os.close(fd)
