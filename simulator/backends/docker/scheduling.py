"""The frame scheduler on the docker backend: one per agent's link, merged after.

Each agent's fault proxy runs in its own "link" container (containers.py), so
there is no single scheduler for the run as on the process backend: each
link's `tetherbed proxy` gets `--schedule`/`--replay` and writes its own
decision log into the run's logs folder, naming its frames `agent-NAME` as
the process backend does. Frames of one agent are ordered against each other
(its connections, both directions); frames of different agents are not
ordered against each other here. At teardown the links' logs are merged into
the run's decision log (by time, renumbered), which a replay on either
backend can read: each link follows its own agent's decisions.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tetherbed.simulator.proxy.scheduler import DecisionLog, DecisionLogError, ScheduleOptions
from tetherbed.simulator.proxy.scheduler.decisions import DecisionWriter

#: Where the links find the run's logs folder (bind-mounted).
LOGS = "/logs"
#: The log a replay's links read, copied into the logs folder.
REPLAYED = "replayed-decisions.jsonl"


def link_name(agent: str) -> str:
    """How an agent's frames are named in decision logs, on every backend."""
    return f"agent-{agent}"


def link_log(agent: str) -> str:
    return f"decisions-{agent}.jsonl"


def link_arguments(options: ScheduleOptions | None, seed: int, agent: str) -> list[str]:
    """The `tetherbed proxy` options of an agent's link (the proxy is named `link`)."""
    if options is None:
        return []
    args = ["--schedule-as", f"link={link_name(agent)}", "--decisions", f"{LOGS}/{link_log(agent)}"]
    if options.replay is not None:
        return [*args, "--replay", f"{LOGS}/{REPLAYED}", "--replay-wait", str(options.wait)]
    return [*args, "--schedule", str(options.bound), "--schedule-seed", str(seed)]


def prepare_replay(options: ScheduleOptions | None, logs: Path) -> None:
    """Put the log a replay follows where the links can read it."""
    if options is not None and options.replay_path is not None:
        shutil.copyfile(options.replay_path, logs / REPLAYED)


def merge_link_logs(
    logs: Path, agents: list[str], out: Path | None, header: dict[str, Any]
) -> dict[str, Any]:
    """Merge the links' decision logs into `out`; the run's schedule report."""
    decisions = []
    released = 0
    divergence: dict[str, int] = {}
    complete = True
    for agent in agents:
        try:
            log = DecisionLog.read(logs / link_log(agent))
        except DecisionLogError:
            complete = False
            continue
        decisions += log.decisions
        summary = log.summary
        if summary is None:  # the link was killed before it could say
            complete = False
            released += len(log.decisions)
            continue
        released += int(summary.get("released", 0))
        for name, value in (summary.get("divergence") or {}).items():
            if isinstance(value, int):
                divergence[name] = divergence.get(name, 0) + value
    decisions.sort(key=lambda d: (d.t, d.key))
    report: dict[str, Any] = {
        "mode": header.get("schedule"),
        "decisions": str(out) if out else None,
        "released": released,
    }
    if divergence:
        report["divergence"] = divergence
    if not complete:
        report["incomplete"] = "a link's decision log is missing or has no summary"
    if out is not None:
        writer = DecisionWriter(out, header)
        for n, decision in enumerate(decisions):
            writer.write(_renumbered(decision, n))
        writer.summary({k: v for k, v in report.items() if k in ("released", "divergence")})
        writer.close()
    return report


def _renumbered(decision: Any, n: int) -> Any:
    raw = decision.to_json()
    raw["n"] = n
    return type(decision).from_json(json.loads(json.dumps(raw)))
