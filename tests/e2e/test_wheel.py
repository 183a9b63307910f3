"""`pip install .` (a wheel, not editable) is enough to use Tetherbed.

The wheel carries the licence and the shipped scenarios as package data, so
`tetherbed demo` and runs of the shipped scenarios work from any folder of a
machine that has only the wheel. The wheel goes into a fresh virtual
environment; its dependencies come from the test suite's own environment
(appended to the path), so nothing is downloaded and the repository's
editable install cannot be picked up instead.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with only the wheel installed in it; returns its bin/."""
    base = tmp_path_factory.mktemp("wheel")
    # Build from a copy of the working tree: setuptools leaves build/ beside the
    # sources, and a stale build/ there would slip deleted files into the wheel.
    source = base / "source"
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    built = run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
        "--wheel-dir", base / "dist", source, cwd=base,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (base / "dist").glob("tetherbed-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    shipped = sorted(n for n in names if n.startswith("tetherbed/scenarios/"))
    # The shipped scenarios and those of optional features (scenarios/local_llm/).
    assert len([n for n in shipped if n.endswith(".yaml")]) == len(
        list((ROOT / "scenarios").rglob("*.yaml"))
    )
    env = base / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    (packages,) = (env / "lib").glob("python3*/site-packages")
    # The dependencies, from this suite's environment, after the wheel's own files.
    (packages / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    installed = run(
        sys.executable, "-m", "pip", "--python", env / "bin" / "python", "install",
        "--no-deps", "--no-index", wheel, cwd=base,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    where = run(
        env / "bin" / "python", "-c", "import tetherbed; print(tetherbed.__file__)", cwd=base
    )
    assert where.stdout.startswith(str(packages)), where.stdout + where.stderr
    return env / "bin"


def test_the_demo_runs_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    demo = run(installed / "tetherbed", "demo", "--report", tmp_path / "r", cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "demo: " in demo.stdout and "s of wall time" in demo.stdout
    assert "open it in a browser: file://" in demo.stdout
    sim = json.loads((tmp_path / "r" / "sim" / "results.json").read_text())
    assert sim["summary"]["pass"] == len(list((ROOT / "scenarios").glob("*.yaml")))
    process = json.loads((tmp_path / "r" / "process" / "results.json").read_text())
    assert process["summary"] == {"runs": 1, "pass": 1, "fail": 0, "error": 0}


def test_shipped_scenarios_run_by_name_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    assert not (tmp_path / "scenarios").exists()
    one = run(
        installed / "tetherbed", "run", "scenarios/partition_race.yaml", "hub_shutdown",
        "--report", tmp_path / "one", cwd=tmp_path,
    )  # fmt: skip
    assert one.returncode == 0, one.stdout + one.stderr
    assert "2 run(s): 2 pass" in one.stdout
    every = run(
        installed / "tetherbed", "run", "--shipped", "--report", tmp_path / "all", cwd=tmp_path
    )
    assert every.returncode == 0, every.stdout + every.stderr
