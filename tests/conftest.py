"""Suite-wide collection rules.

The Docker tests run whenever a Docker engine answers (`docker info`); on a
machine without one they are deselected — and the run says so in its summary
— rather than failing for want of an engine. When the engine answers, nothing
about them is optional: a failed image build or an unhealthy container fails
the test with the reason.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest

#: `pytester` runs a small suite in-process (the pytest plugin's own tests); the
#: fuzz figures plugin prints the examples each live fuzz target ran.
pytest_plugins = ["pytester", "tetherbed.simulator.fuzz.live.pytest_figures"]
#: The user property under which fuzz tests record their figures (examples,
#: time), printed at the end of the run.
FUZZ_FIGURES = "fuzz_figures"


@functools.cache
def docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        probe = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return probe.returncode == 0 and bool(probe.stdout.strip())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    docker = [item for item in items if item.get_closest_marker("docker")]
    if not docker or docker_engine_answers():
        return
    config.hook.pytest_deselected(items=docker)
    items[:] = [item for item in items if not item.get_closest_marker("docker")]
    config._tetherbed_docker_deselected = len(docker)  # type: ignore[attr-defined]


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    count = getattr(config, "_tetherbed_docker_deselected", 0)
    if count:
        terminalreporter.write_line(
            f"tetherbed: no Docker engine answered `docker info`: {count} docker tests not run",
            yellow=True,
        )
    # Figures the fuzz tests record (`record_property(FUZZ_FIGURES, ...)`):
    # user properties reach this process from xdist workers too.
    figures = [
        value
        for report in terminalreporter.stats.get("passed", [])
        for name, value in getattr(report, "user_properties", [])
        if name == FUZZ_FIGURES
    ]
    for line in sorted(figures):
        terminalreporter.write_line(f"tetherbed fuzz: {line}")
