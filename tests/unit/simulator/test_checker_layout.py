"""Checkers read spec constants from wire/ and never import hub/ or agent/; the
checkers folder keeps its file names apart."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

CHECKERS = Path(__file__).resolve().parents[3] / "simulator" / "checkers"


def test_checkers_never_import_the_hub_or_the_agent() -> None:
    """Imported in a fresh interpreter: nothing of hub/ or agent/ comes along,
    directly or through anything the checkers import."""
    probe = (
        "import sys, tetherbed.simulator.checkers\n"
        "parts = ('tetherbed.hub', 'tetherbed.agent')\n"
        "print(sorted(m for m in sys.modules if m.startswith(parts)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_no_three_files_of_the_checkers_share_a_name_prefix() -> None:
    for folder in [CHECKERS, *[p for p in CHECKERS.iterdir() if p.is_dir()]]:
        names = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        prefixes = Counter(name.split("_")[0] for name in names)
        crowded = {prefix: count for prefix, count in prefixes.items() if count >= 3}
        assert not crowded, (folder, crowded)
