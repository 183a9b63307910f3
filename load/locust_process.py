"""Running Locust headless in its own process(es), never in this one.

Locust patches the standard library with gevent when it is imported, so
`tetherbed load` (which may run asyncio parts) only ever starts it as
`python -m locust`: alone, with `--processes N` (Locust's own master and N
forked workers on this machine), as a master waiting for workers on other
machines, or as a worker of such a master. Its CSV files, HTML report and
log go to the run folder; the process group is stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from tetherbed.load.plan import Plan

#: Seconds Locust gets, past the plan's stages, to ramp, drain and write its reports.
GRACE_SECONDS = 60.0
#: The default port of a Locust master (Locust's own default).
MASTER_PORT = 5557


def locustfile(profile: str) -> Path:
    """The shipped locustfile of a profile (inside the installed package)."""
    path = Path(str(resources.files("tetherbed.load.locustfiles") / f"{profile}.py"))
    if not path.is_file():
        raise FileNotFoundError(f"no locustfile for profile {profile!r} at {path}")
    return path


@dataclass
class Distribution:
    """How Locust is spread: alone, `workers` forked here, or over machines."""

    #: Forked worker processes on this machine (0: one process does everything).
    workers: int = 0
    #: Run as a master that waits for this many workers from other machines.
    expect_workers: int = 0
    master_bind: str = "*"
    master_port: int = MASTER_PORT

    @property
    def distributed(self) -> bool:
        return self.workers > 0 or self.expect_workers > 0


@dataclass
class LocustRun:
    folder: Path
    process: subprocess.Popen[bytes]
    started: float
    log_path: Path
    pids: list[int] = field(default_factory=list)

    @property
    def csv_prefix(self) -> Path:
        return self.folder / "locust"

    @property
    def html(self) -> Path:
        return self.folder / "report.html"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop_early(self) -> None:
        """End the test now, as Ctrl-C would: Locust still writes its reports."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGINT)

    def wait(self, timeout: float, *, tick: Callable[[], None] | None = None) -> int:
        """Until Locust exits (its status), calling `tick` about every 0.1 s;
        after `timeout` it is interrupted, then terminated, then killed."""
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            if tick is not None:
                tick()
            time.sleep(0.1)
        if self.alive():
            self.stop_early()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.wait()

    def kill(self) -> None:
        """SIGTERM, then SIGKILL, to Locust's whole process group (its workers too)."""
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if not self.alive():
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5)
        # Forked workers outlive a master killed by SIGKILL: their group too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def log(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


def start(plan: Plan, folder: Path, distribution: Distribution) -> LocustRun:
    """Start Locust headless on the plan's profile; its reports go to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile(plan.profile)),
        "--headless",
        "--tetherbed-plan",
        plan.encode(),
        "--csv",
        str(folder / "locust"),
        "--csv-full-history",
        "--html",
        str(folder / "report.html"),
        "--only-summary",
        "--exit-code-on-error",
        "0",
        # Users are killed at the end; clients have drained by then
        # (users/draining.py), and a waiting master would only add seconds.
        "--stop-timeout",
        "0",
    ]
    if distribution.workers:
        argv += ["--processes", str(distribution.workers)]
    elif distribution.expect_workers:
        argv += [
            "--master",
            "--expect-workers",
            str(distribution.expect_workers),
            "--master-bind-host",
            distribution.master_bind,
            "--master-bind-port",
            str(distribution.master_port),
        ]
    return _spawn(argv, folder)


def start_worker(
    profile: str, folder: Path, master_host: str, master_port: int, processes: int
) -> LocustRun:
    """A worker (or `processes` of them) of a master on another machine: the
    master sends the plan with the first spawn message."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile(profile)),
        "--worker",
        "--master-host",
        master_host,
        "--master-port",
        str(master_port),
    ]
    if processes > 1:
        argv += ["--processes", str(processes)]
    return _spawn(argv, folder)


def _spawn(argv: list[str], folder: Path) -> LocustRun:
    log_path = folder / "locust.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return LocustRun(folder, process, time.time(), log_path)
