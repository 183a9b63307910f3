"""Running `tetherbed conform` as a user would, and reading its conformance.json.

Each run is its own process (the suite starts its own peers, targets and
displays, and stops them by PID); the tests judge what it reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.agent.environment import REFERENCE_CONTROL, REFERENCE_DATA

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
#: Generous: a suite takes well under this; a hang must still end the test.
RUN_TIMEOUT = 600

#: Tetherbed's own agent as a command template (data and control mode): the
#: suite's own, so a defect run differs from the reference run only by its flags.
AGENT = list(REFERENCE_DATA)
CONTROL = list(REFERENCE_CONTROL)
MINIMAL_AGENT = [
    PYTHON, str(ROOT / "tests" / "third_party" / "minimal_agent.py"), "--url", "{hub_url}",
    "--token", "{token}", "--session", "{session}", "--root", "{root}",
    "--machine", "{machine}", "{shell_flag}", "--max-concurrent", "{max_concurrent}",
    "--protocol-version", "{protocol_version}",
]  # fmt: skip
NATIVE = [PYTHON, "-m", "tetherbed", "native", "--stdio", "--password-fd", "3", "--video-ws",
          "--quality", "low"]  # fmt: skip
NATIVE_DOCTOR = [PYTHON, "-m", "tetherbed", "native", "doctor", "--json"]


def with_flags(template: list[str], *flags: str) -> list[str]:
    """A Tetherbed command with extra flags after its subcommand (e.g. --defect X)."""
    index = template.index("agent") + 1 if "agent" in template else template.index("native") + 1
    return [*template[:index], *flags, *template[index:]]


@dataclass
class Report:
    exit_code: int
    data: dict[str, Any]
    output: str

    @property
    def summary(self) -> str:
        return str(self.data.get("summary_line", ""))

    def ids(self, *outcomes: str) -> set[str]:
        return {c["id"] for c in self.data.get("cases", []) if c["outcome"] in outcomes}

    def must_not_passing(self) -> dict[str, str]:
        """Every MUST case that did not pass (a skip counts: it was not judged)."""
        return {
            c["id"]: f"{c['outcome']}: {c['reason']}"
            for c in self.data.get("cases", [])
            if c["level"] == "MUST" and c["outcome"] != "pass"
        }


def conform(suite: str, *args: str, command: list[str] | None = None, tmp: Path) -> Report:
    out = tmp / f"conformance-{suite}.json"
    argv = [PYTHON, "-m", "tetherbed", "conform", suite, *args, "--json", str(out)]
    if command:
        argv += ["--", *command]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=ROOT, env=env, check=False
    )
    output = done.stdout + done.stderr
    try:
        data = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise AssertionError(
            f"no conformance.json (exit {done.returncode}):\n{output[-4000:]}"
        ) from None
    print(output[-6000:])  # the table, for the test log
    return Report(done.returncode, data, output)
