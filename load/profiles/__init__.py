"""One orchestration per profile: topology, plan, Locust, analysis."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable


def _runner(module: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(f"tetherbed.load.profiles.{module}").run(args)

    return run


#: `tetherbed load PROFILE` → the function that runs it (imported when used).
PROFILE_RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: _runner(name) for name in ("relay", "storm", "takeover", "video")
}
