"""The standalone agent file the hub serves and join.sh installs: `agent.pyz`.

A zipapp of exactly the modules the dsh agent needs — itself, `wire/dsh`,
the clock, and the empty package roots — so a machine runs it with nothing
but `python3` (3.11+), as the spec's agent runs with nothing but Node. The
archive is built from the installed modules with fixed timestamps, so the
same code gives the same bytes (and the same ETag).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import zipfile
from pathlib import Path

from tetherbed.wire.dsh.constants import AGENT_MIN_PYTHON

#: package -> the files of it to ship ("*": every .py file of the folder).
CONTENTS: dict[str, tuple[str, ...]] = {
    "tetherbed": ("__init__.py",),
    "tetherbed.runtime": ("__init__.py", "clock.py"),
    "tetherbed.wire": ("__init__.py",),
    "tetherbed.wire.dsh": ("*",),
    "tetherbed.agent": ("__init__.py",),
    "tetherbed.agent.dsh": ("*",),
}

_MAIN = f'''"""Tetherbed's dsh-computers agent (standalone)."""
import os
import sys

if sys.version_info < {AGENT_MIN_PYTHON!r}:
    sys.exit("this agent needs Python {".".join(map(str, AGENT_MIN_PYTHON))} or newer; "
             "this is " + sys.version.split()[0])
from tetherbed.agent.dsh.cli import main

raise SystemExit(main(program=[sys.executable, os.path.abspath(sys.argv[0])]))
'''

_EPOCH = (1980, 1, 1, 0, 0, 0)


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find package {package}")
    return Path(next(iter(spec.submodule_search_locations)))


def _files() -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for package, names in CONTENTS.items():
        folder = _package_dir(package)
        arc = package.replace(".", "/")
        paths = sorted(folder.glob("*.py")) if names == ("*",) else [folder / n for n in names]
        found += [(f"{arc}/{path.name}", path) for path in paths]
    return found


@functools.cache
def agent_bundle() -> bytes:
    """The zipapp's bytes (built once per process)."""
    buffer = io.BytesIO()
    buffer.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for arcname, path in [("__main__.py", None), *_files()]:
            info = zipfile.ZipInfo(arcname, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            data = _MAIN.encode() if path is None else path.read_bytes()
            archive.writestr(info, data)
    return buffer.getvalue()


def bundle_etag() -> str:
    return '"' + hashlib.sha256(agent_bundle()).hexdigest()[:32] + '"'
