"""Every nemesis kind, once, in one generated run: for the per-backend tests.

`coverage_scenario(backend)` is a small generated scenario whose nemesis has
every kind the backend can carry out, at rates high enough to fire each;
`seed_firing_all` finds a seed whose plan holds every one of them (the plan
does not depend on the backend, so the seed is found without running
anything); `shown` says, per kind, whether the run's history shows it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tetherbed.simulator.explore.generator import plan_for
from tetherbed.simulator.history import History
from tetherbed.simulator.scenario import Scenario, parse
from tetherbed.simulator.scenario.generation import NEMESIS_KINDS

#: The required parameters of the kinds that have some.
REQUIRED = {
    "latency": {"latency_ms": 20},
    "bandwidth": {"rate_kbps": 100},
    "limit_data": {"bytes": 4000},
    "delay": {"delay_ms": 50},
    "inject_close": {"code": 4000, "reason": "nemesis"},
    "loss": {"percent": 5},
}
_LIFECYCLE_EVENT = {"pause": "paused", "kill": "killed"}


def kinds_for(backend: str) -> list[str]:
    found = []
    for name, kind in NEMESIS_KINDS.items():
        if kind.backends is None or backend in kind.backends:
            found.append(name)
    return found


def coverage_scenario(backend: str, *, duration: float = 10.0) -> Scenario:
    nemesis: dict[str, Any] = {}
    for kind in kinds_for(backend):
        spec: dict[str, Any] = {"rate": 0.6, **REQUIRED.get(kind, {})}
        if NEMESIS_KINDS[kind].lasting:
            spec["duration"] = [0.2, 0.5]
        nemesis[kind] = spec
    nemesis["revoke"]["rate"] = 0.1
    nemesis["hub_restart"]["rate"] = 0.2
    document = {
        "name": f"every nemesis kind on {backend}",
        "checkers": ["exactly_one_answer"],
        "topology": {
            "hub": {"options": {"request_timeout": 5, "retry_window": 5}},
            "agents": {
                "a1": {"machine": "a", "session": "s", "options": {"shell": True}},
                "a2": {"machine": "a", "session": "s", "options": {"shell": True}},
                "b1": {"machine": "b", "session": "s", "options": {"shell": True}},
            },
            "clients": {"alice": {"session": "s"}},
        },
        "generate": {
            "duration": duration,
            "start": ["a1"],
            "stagger": 0,
            "clients": {"alice": {"rate": 2}},
            "command_seconds": [0, 0.3],
            "settle": 3,
        },
        "nemesis": nemesis,
    }
    return parse(document, None, backend)


def seed_firing_all(scenario: Scenario, kinds: Iterable[str], tries: int = 500) -> int:
    wanted = set(kinds)
    for seed in range(1, tries + 1):
        plan = plan_for(scenario, seed)
        fired = {item.kind for item in plan.items}
        if wanted <= fired:
            return seed
    raise LookupError(f"no seed in 1..{tries} fires all of {sorted(wanted)}")


def shown(history: History, kinds: Iterable[str], *, wire_effects: bool = False) -> dict[str, bool]:
    """Kind → whether the history shows it happen: the fault's own record
    (`fault_start`), or the lifecycle event of the part it hit (`paused`,
    `killed`, the hub `killed` and `started`, the newcomer `started`, the
    revoke step carried out). With `wire_effects`, takeovers and revocations
    must also show on the wire (SESSION_REVOKED with its reason, a 4427) —
    certain on sim, where the plan's timing holds; on real processes another
    fault may have cut the connection first."""
    faults = {
        (r.value or {}).get("kind")
        for r in history
        if r.process == "fault" and r.f == "fault_start" and isinstance(r.value, dict)
    }
    events = {(r.process, r.f) for r in history if r.type == "event"}
    steps = [r.value for r in history if r.process == "runner" and r.f == "step"]
    started = [
        (r.value or {}).get("detail")
        for r in history
        if r.process == "runner" and r.f == "step" and (r.value or {}).get("name") == "start"
    ]
    frames = [
        r.value
        for r in history
        if r.process.startswith("wire:") and r.f == "frame" and isinstance(r.value, dict)
    ]

    def revoked_for(reason: str) -> bool:
        return any(
            f.get("type") == "SESSION_REVOKED" and (f.get("payload") or {}).get("reason") == reason
            for f in frames
        )

    refused = any(
        r.process.startswith("wire:") and r.f == "close" and (r.value or {}).get("code") == 4427
        for r in history
    )
    newcomers = sum(1 for name in started if name != "hub")
    result = {}
    for kind in kinds:
        if kind in _LIFECYCLE_EVENT:
            result[kind] = any(f == _LIFECYCLE_EVENT[kind] for _, f in events)
        elif kind == "hub_restart":
            result[kind] = ("hub", "killed") in events and ("hub", "started") in events
        elif kind == "revoke":
            ran = any(isinstance(v, dict) and v.get("name") == "revoke" for v in steps)
            result[kind] = ran and (not wire_effects or revoked_for("user_revoked"))
        elif kind == "takeover_same_machine":
            result[kind] = newcomers > 1 and (
                not wire_effects or revoked_for("another_shim_connected")
            )
        elif kind == "takeover_other_machine":
            result[kind] = newcomers > 1 and (not wire_effects or refused)
        else:
            result[kind] = kind in faults
    return result
