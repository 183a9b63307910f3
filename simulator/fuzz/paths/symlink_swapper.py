"""A thread that keeps swapping a directory of the root for a symlink to outside.

While it runs, `root/swap` is now a real directory holding `file.txt`, now a
symlink to the sentinel, as fast as two renames allow — the time-of-check to
time-of-use race a jail must survive: an operation that checked `swap/...`
while it was a directory must not then follow the link. Operations may move
or delete what it swaps; it rebuilds what it needs and carries on.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType

from tetherbed.simulator.fuzz.paths.arena import PARKED, ROOT_FILE, SWAP, Arena


class SymlinkSwapper:
    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.swaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="symlink-swapper", daemon=True)

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
        while not self._stop.is_set():
            try:
                if swap.is_symlink():
                    swap.unlink()
                    _ensure_directory(parked)
                    os.rename(parked, swap)
                else:
                    if os.path.lexists(swap):
                        os.rename(swap, parked)
                    swap.symlink_to(self.arena.outside)
                self.swaps += 1
            except OSError:
                continue  # an operation moved or removed it meanwhile


def _ensure_directory(path: Path) -> None:
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
