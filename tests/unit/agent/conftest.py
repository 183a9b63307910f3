"""Fixtures shared by the file-operation tests: an allowed root and its jail.

A test module overrides `root` to lay out the files it needs; `jail` follows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.agent.path_jail import PathJail


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def jail(root: Path) -> PathJail:
    return PathJail(str(root))
