"""Temporaries in the tree: unnamed while written, recorded while named, swept after a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tetherbed.agent.files import atomic
from tetherbed.agent.operations import DataOperations
from tetherbed.agent.path_jail import PathJail
from tetherbed.agent.temporaries import TEMP_NAME, TemporaryLedger, temp_name
from tetherbed.runtime.clock import SystemClock


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = Path(os.path.realpath(tmp_path)) / "root"
    (root / "d").mkdir(parents=True)
    return root


def _die(ledger: TemporaryLedger) -> None:
    """What SIGKILL does to a ledger: its lock goes, its file and lines stay."""
    assert ledger._file is not None
    ledger._file.close()


def test_a_write_has_no_name_in_the_tree_until_it_is_renamed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []
    fill = atomic._fill

    def watching(fd: int, data: bytes, mode: int | None) -> None:
        fill(fd, data, mode)
        seen.append(sorted(os.listdir(root / "d")))

    monkeypatch.setattr(atomic, "_fill", watching)
    fd = os.open(root / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        atomic.replace_file(fd, "f.txt", b"data", directory=str(root / "d"))
    finally:
        os.close(fd)
    assert seen == [[]], "the data was written under a name"
    assert os.listdir(root / "d") == ["f.txt"] and (root / "d" / "f.txt").read_bytes() == b"data"


def test_named_fallback_is_recorded_and_swept_after_a_crash(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomic, "_CAN_NAME_UNNAMED", False)  # a file system without O_TMPFILE
    ledgers = tmp_path / "state" / "temporaries"
    dead = TemporaryLedger(ledgers, str(root))
    crashed: list[str] = []
    fill = atomic._fill

    def crash_mid_write(fd: int, data: bytes, mode: int | None) -> None:
        fill(fd, data[:10], mode)
        crashed.extend(n for n in os.listdir(root / "d") if TEMP_NAME.fullmatch(n))
        _die(dead)
        raise KeyboardInterrupt  # stands in for the process vanishing mid-write

    monkeypatch.setattr(atomic, "_fill", crash_mid_write)
    monkeypatch.setattr(atomic, "_unlink_quietly", lambda *a: None)  # a dead agent cleans nothing
    fd = os.open(root / "d", os.O_RDONLY | os.O_DIRECTORY)
    with pytest.raises(KeyboardInterrupt):
        atomic.replace_file(fd, "f.txt", b"x" * 100, directory=str(root / "d"), ledger=dead)
    os.close(fd)
    assert len(crashed) == 1 and (root / "d" / crashed[0]).exists()

    operations = DataOperations(root=str(root), clock=SystemClock(), temporaries_dir=ledgers)
    assert os.listdir(root / "d") == []
    assert dead.path is not None and not dead.path.exists()
    assert operations.temporaries.path is not None and operations.temporaries.path.exists()


def test_sweep_spares_live_agents_other_roots_and_everything_else(
    root: Path, tmp_path: Path
) -> None:
    ledgers = tmp_path / "state" / "temporaries"
    outside = tmp_path / "outside"
    outside.mkdir()
    keep = {
        "alive": (root / "d", temp_name()),  # its agent still runs
        "not a temp": (root / "d", "precious.txt"),
        "outside the root": (outside, temp_name()),
    }
    for directory, name in keep.values():
        (directory / name).write_text("keep me")
    alive = TemporaryLedger(ledgers, str(root))
    with alive.holding(str(root / "d"), keep["alive"][1]):
        dead = TemporaryLedger(ledgers, str(root))
        for key in ("not a temp", "outside the root"):
            directory, name = keep[key]
            dead._note("+", str(directory), name)
        swept_name = temp_name()
        (root / "d" / swept_name).mkdir()  # a cross-device copy cut short: a tree
        (root / "d" / swept_name / "inner").write_text("partial")
        dead._note("+", str(root / "d"), swept_name)
        other_root = TemporaryLedger(ledgers, str(outside))
        other_root._note("+", str(outside), keep["outside the root"][1])
        _die(dead)
        _die(other_root)
        removed = TemporaryLedger(ledgers, str(root)).sweep(PathJail(str(root)))
    assert removed == [f"{root / 'd'}/{swept_name}"]
    for directory, name in keep.values():
        assert (directory / name).read_text() == "keep me"
    assert other_root.path is not None and other_root.path.exists()


def test_a_clean_stop_removes_the_ledger(root: Path, tmp_path: Path) -> None:
    ledger = TemporaryLedger(tmp_path / "t", str(root))
    assert ledger.path is not None and ledger.path.exists()
    ledger.close()
    assert not ledger.path.exists()
