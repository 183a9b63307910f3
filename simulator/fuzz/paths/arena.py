"""A jailed root next to a sentinel tree that must never change or leak.

    base/
      root/          the agent's allowed root, rebuilt before every example
      outside/       the sentinel: marked contents, a unique mtime and size
      root-evil/     a sibling sharing the root's name as a prefix (a sentinel too)

The sentinel sits in the root's *parent*, so a jail whose check stops one
component short reaches it; its files hold a marker string, are `SENTINEL_SIZE`
bytes long and carry `SENTINEL_MTIME`, so any read, stat or listing that
reaches them shows in the answer. `snapshot()` records every entry below
`base` except the root (names, kinds, sizes, mtimes, modes, contents, link
targets); a write, move or delete outside the root changes it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import unicodedata
from pathlib import Path

#: In every sentinel file's contents; never in anything the fuzzer writes.
MARKER = "TETHERBED-SENTINEL-7f3a9c"
#: Every sentinel file is exactly this long and carries this mtime.
SENTINEL_SIZE = 7919
SENTINEL_MTIME = 1_234_567_890.5
SENTINEL_DIRS = ("outside", "root-evil")
#: A name in two Unicode normal forms (distinct names on Linux).
CAFE_NFC = unicodedata.normalize("NFC", "café")
CAFE_NFD = unicodedata.normalize("NFD", "café")
#: Entries of the root (rebuilt before every example).
ROOT_FILE = "file.txt"
ROOT_DIR = "dir"
LINK_OUT = "link_out"  # -> ../outside
LINK_IN = "link_in"  # -> dir
LINK_ABSOLUTE = "link_abs"  # -> /…/outside/secret.txt
SWAP = "swap"  # a directory a thread keeps swapping for a symlink to outside
PARKED = ".swap-parked"  # the hidden symlink to outside it trades places with


def _sentinel_content() -> bytes:
    line = f"{MARKER}\n".encode()
    body = line * (SENTINEL_SIZE // len(line) + 1)
    return body[:SENTINEL_SIZE]


class Arena:
    def __init__(self, base: Path) -> None:
        self.base = Path(os.path.realpath(base))
        self.root = self.base / "root"
        self.outside = self.base / "outside"
        self._build_sentinels()
        self.reset_root()
        self.baseline = self.snapshot()

    # --- building ----------------------------------------------------------------

    def _build_sentinels(self) -> None:
        content = _sentinel_content()
        for name in SENTINEL_DIRS:
            top = self.base / name
            (top / "sub").mkdir(parents=True, exist_ok=True)
            for path in (top / "secret.txt", top / "sub" / "deep.txt", top / CAFE_NFC):
                path.write_bytes(content)
            (top / ROOT_FILE).write_bytes(content)  # the same name as a root file
        for name in SENTINEL_DIRS:
            for directory, dirs, files in os.walk(self.base / name, topdown=False):
                for entry in (*files, *dirs):
                    os.utime(os.path.join(directory, entry), (SENTINEL_MTIME, SENTINEL_MTIME))
                os.utime(directory, (SENTINEL_MTIME, SENTINEL_MTIME))

    def restore_sentinels(self) -> None:
        """Put the sentinel back as built, if an example changed it (so the next
        example, and the shrinker's, is judged on its own)."""
        if not self.changes():
            return
        for name in os.listdir(self.base):
            if name == self.root.name:
                continue
            path = self.base / name
            if path.is_symlink() or not path.is_dir():
                path.unlink()
            else:
                shutil.rmtree(path)
        self._build_sentinels()

    def reset_root(self) -> None:
        """The root's starting tree, whatever the last example did to it."""
        if self.root.is_symlink() or self.root.is_file():
            self.root.unlink()
        elif self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir()
        (self.root / ROOT_FILE).write_text("inside\n")
        (self.root / ROOT_DIR / "sub").mkdir(parents=True)
        (self.root / ROOT_DIR / "inner.txt").write_text("inner\n")
        (self.root / CAFE_NFC).write_text("nfc\n")
        (self.root / SWAP).mkdir()
        (self.root / SWAP / ROOT_FILE).write_text("swap inside\n")
        (self.root / LINK_OUT).symlink_to(os.path.join("..", "outside"))
        (self.root / LINK_IN).symlink_to(ROOT_DIR)
        (self.root / LINK_ABSOLUTE).symlink_to(self.outside / "secret.txt")
        (self.root / PARKED).symlink_to(self.outside)  # what `swap` trades places with

    # --- judging -------------------------------------------------------------------

    def snapshot(self) -> dict[str, tuple[object, ...]]:
        """Every entry below `base` but the root, as lstat and contents show it."""
        seen: dict[str, tuple[object, ...]] = {}
        for directory, dirs, files in os.walk(self.base):
            if Path(directory) == self.base:
                dirs[:] = [d for d in dirs if d != self.root.name]
                seen["."] = tuple(sorted(n for n in os.listdir(directory) if n != self.root.name))
            for name in (*dirs, *files):
                path = os.path.join(directory, name)
                status = os.lstat(path)
                if stat.S_ISLNK(status.st_mode):
                    detail: object = os.readlink(path)
                elif stat.S_ISREG(status.st_mode):
                    detail = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                else:
                    detail = tuple(sorted(os.listdir(path)))
                relative = os.path.relpath(path, self.base)
                seen[relative] = (
                    stat.S_IFMT(status.st_mode),
                    stat.S_IMODE(status.st_mode),
                    status.st_size,
                    status.st_mtime_ns,
                    detail,
                )
        return seen

    def changes(self) -> list[str]:
        """What happened outside the root since the arena was built."""
        now = self.snapshot()
        changed = [
            f"created or changed outside the root: {p}" for p in now if p not in self.baseline
        ]
        changed += [f"removed outside the root: {p}" for p in self.baseline if p not in now]
        changed += [
            f"modified outside the root: {p} {self.baseline[p]} -> {now[p]}"
            for p in now
            if p in self.baseline and now[p] != self.baseline[p]
        ]
        return changed

    def expand(self, text: str) -> str:
        """`text` with the path strategies' placeholders replaced by this arena's
        directories (JSON-safe: the directories are plain ASCII temp paths)."""
        return (
            text.replace("<ROOT>", str(self.root))
            .replace("<BASE>", str(self.base))
            .replace("<OUTSIDE>", str(self.outside))
        )

    def inside(self, path: str) -> bool:
        """Whether a path an answer names lies in the root, as written (a link
        in the root that points out is still an entry of the root)."""
        lexical = os.path.normpath(path)
        root = str(self.root)
        return lexical == root or lexical.startswith(root + "/")
