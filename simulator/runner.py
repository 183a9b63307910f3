"""Runs one scenario on one backend: steps, then checkers, then reports.

Steps run in order on the backend's clock. A failed `expect` or `assert`
stops the steps (the state after it is not what the scenario assumed) but
the run still drains outstanding requests, records the final files and runs
every checker, so the history explains what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shlex
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tetherbed.simulator import control_steps
from tetherbed.simulator.backends.base import Backend, BackendError
from tetherbed.simulator.checkers import Verdict, run_checkers
from tetherbed.simulator.client import ScenarioClient
from tetherbed.simulator.dsh import steps as dsh_steps
from tetherbed.simulator.dsh.client import DshClient
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.proxy.scheduler import ScheduleOptions, record_outcome
from tetherbed.simulator.reports.results import overall_verdict
from tetherbed.simulator.scenario import ClientSpec, Scenario, Step
from tetherbed.simulator.scenario.schema import SERIAL_STEPS
from tetherbed.simulator.stop_signals import Interrupted, StopSignals
from tetherbed.simulator.targets import Target
from tetherbed.simulator.wiretap import records as wire
from tetherbed.wire import serial_io

#: Default `within` of an expect step, in backend seconds.
DEFAULT_WITHIN = 30.0
#: How long to wait at the end for answers still outstanding.
DRAIN_SECONDS = 120.0


_COMPLETIONS = frozenset({"ok", "fail", "info"})
#: Steps that only watch or wait; events are expected from the action before them.
_PASSIVE_STEPS = frozenset({"expect", "assert", "wait", "note"})


class StepFailed(Exception):
    """An expect or assert step whose condition did not hold."""


class NotApplicable(Exception):
    """The scenario needs what a third-party part under test does not do (an
    extension it did not negotiate): it cannot say anything about that target."""


#: What `plug` and `unplug` record (process `serial:<agent>`, value {port}).
_PLUG_EVENTS = {"plug": "plugged", "unplug": "unplugged"}


@dataclass
class RunOutcome:
    scenario: Scenario
    backend: str
    seed: int
    history: History
    verdicts: list[Verdict]
    error: str | None
    #: An expect or assert step whose condition did not hold: the system under
    #: test did not do what the scenario says it must (a failure, not an error).
    step_failure: str | None
    seconds: float
    #: A SIGTERM or SIGINT stopped it before its end.
    interrupted: bool = False
    #: Reference-only steps skipped because a part under test is a third party.
    not_applicable: list[str] = field(default_factory=list)
    #: Unknown verdicts count as failures (`--strict`).
    strict: bool = False
    #: The failed step could not be judged (it read the journal of a part that
    #: keeps none): the run is an error, not a failure of the system under test.
    step_unjudged: bool = False
    #: Why the scenario does not apply to this target (a third-party part did
    #: not negotiate an extension it needs): neither a pass nor a failure.
    inapplicable: str | None = None
    #: What the proxies' frame scheduler did (`schedule_report`), when one was on.
    schedule: dict[str, Any] | None = None

    @property
    def run_error(self) -> str | None:
        """Why the run could not be judged, if it could not."""
        return self.error or (self.step_failure if self.step_unjudged else None)

    @property
    def failure(self) -> str | None:
        """The failed step, when it is the system under test's failure."""
        return None if self.step_unjudged else self.step_failure

    @property
    def verdict(self) -> str:
        """pass, fail, error or not_applicable, as the reports say it."""
        return overall_verdict(
            self.verdicts,
            self.run_error,
            failure=self.failure,
            strict=self.strict,
            inapplicable=self.inapplicable,
        )

    @property
    def ok(self) -> bool:
        return self.error is None and self.step_failure is None and self.verdict == "pass"

    @property
    def unknown(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.unknown]


BackendFactory = Callable[..., Backend]


def backend_factory(name: str) -> BackendFactory:
    if name == "sim":
        from tetherbed.simulator.backends.sim import SimBackend

        return SimBackend
    if name == "process":
        from tetherbed.simulator.backends.process import ProcessBackend

        return ProcessBackend
    if name == "docker":
        from tetherbed.simulator.backends.docker.backend import DockerBackend

        return DockerBackend
    raise ValueError(f"unknown backend {name!r} (sim, process, docker)")


def replay_command(scenario: Scenario, backend: str, seed: int) -> str:
    path = str(scenario.path) if scenario.path else scenario.name
    return shlex.join(["tetherbed", "run", path, "--backend", backend, "--seed", str(seed)])


def run_scenario(
    scenario: Scenario,
    backend_name: str,
    seed: int,
    workdir: Path,
    stop: StopSignals | None = None,
    *,
    target: Target | None = None,
    strict: bool = False,
    schedule: ScheduleOptions | None = None,
) -> RunOutcome:
    """Run one scenario against `target` (Tetherbed's own parts by default), then
    judge: the checkers see whatever was recorded, even after an error.

    With `stop`, a SIGTERM or SIGINT ends the run early: the backend's teardown
    stops every part it started and the outcome says it was interrupted.

    With `schedule` (process and docker backends), the agents' fault proxies
    hold every WebSocket message and release it in a seeded order, or in the
    order of a decision log (docs/explore.md, "Scheduling real processes");
    the run's verdict is appended to the decision log it writes.
    """
    if scenario.generated:  # `generate:`/`nemesis:`: the seed draws the steps
        from tetherbed.simulator.explore.generator import generated_scenario

        scenario = generated_scenario(scenario, seed, backend_name)
    factory = backend_factory(backend_name)
    options: dict[str, Any] = {}
    if target is not None and not target.is_reference:
        options["target"] = target
    if schedule is not None:
        if backend_name == "sim":
            raise ValueError("the sim backend orders events by its seed; it has no frame scheduler")
        options["schedule"] = schedule
    backend = factory(scenario, workdir, seed, **options)
    started = time.monotonic()
    runner = ScenarioRunner(scenario, backend)
    error: str | None = None
    interrupted = False
    try:
        backend.run(runner.main() if stop is None else stop.guard(runner.main()))
    except Interrupted as exc:
        interrupted = True
        error = f"{exc}: the run was cut short and every part it started was stopped"
    except Exception as exc:
        error = describe_error(exc)
    # Events read back from process logs arrive late: order everything by time.
    history = History.merged(backend.recorder.history)
    verdicts = run_checkers(history, list(scenario.checkers), checker_options(scenario))
    outcome = RunOutcome(
        scenario=scenario,
        backend=backend_name,
        seed=seed,
        history=history,
        verdicts=verdicts,
        error=error or runner.error,
        step_failure=runner.step_failure,
        step_unjudged=runner.step_unjudged,
        seconds=time.monotonic() - started,
        interrupted=interrupted,
        not_applicable=runner.not_applicable,
        strict=strict,
        inapplicable=runner.inapplicable,
    )
    report_of = getattr(backend, "schedule_report", None)
    if schedule is not None and report_of is not None:
        outcome.schedule = report_of()
        failed = [v.name for v in verdicts if v.failed]
        if outcome.failure is not None:
            failed.append("step")
        record_outcome(schedule.decisions, outcome.verdict, failed)
    return outcome


def describe_error(exc: BaseException) -> str:
    """The error's message on the first line (what a terminal shows), then its
    traceback (what the report keeps for whoever debugs it)."""
    trace = "".join(traceback.format_exception(exc, limit=8))
    return f"{type(exc).__name__}: {exc}\n\n{trace}"


def checker_options(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """The scenario's own checker options, plus what the topology implies for
    the file checkers: each session's initial files, and which sessions share a
    disk (agents of one machine share its folder)."""
    options = {name: dict(values) for name, values in scenario.checker_options.items()}
    initial: dict[str, dict[str, str]] = {}
    disks: dict[str, str] = {}
    for agent in scenario.topology.agents.values():
        if agent.session is None:  # an SSE agent serves no session
            continue
        files = agent.options.get("files") or {}
        initial.setdefault(agent.session, {}).update({p: str(c) for p, c in files.items()})
        disks.setdefault(agent.session, agent.root)
    for name in ("no_crossed_answers", "file_contents"):
        if name in scenario.checkers:
            options.setdefault(name, {}).setdefault("initial_files", initial)
            options[name].setdefault("file_systems", disks)
    return options


class ScenarioRunner:
    def __init__(self, scenario: Scenario, backend: Backend) -> None:
        self.scenario = scenario
        self.backend = backend
        self.recorder = backend.recorder
        self.clients: dict[str, ScenarioClient | DshClient] = {}
        self.dsh = dsh_steps.DshSteps(self)
        self.control = control_steps.ControlSteps(self)
        self.step_failure: str | None = None
        self.step_unjudged = False
        self.error: str | None = None
        #: Reference-only steps skipped for a third-party target, described.
        self.not_applicable: list[str] = []
        #: Why the whole scenario does not apply to the target (None: it does).
        self.inapplicable: str | None = None
        self._step_started: dict[int, int] = {}
        #: Where the last step that does something (not expect/assert/wait)
        #: began: an `expect {event: ...}` looks from there, so an event caused
        #: by that action counts even if a backend reads it from a log late or
        #: early.
        self._action_started = 0

    async def main(self) -> None:
        try:
            await self.backend.setup()
            for spec in self.scenario.topology.clients.values():
                self.add_client(spec)
            try:
                await asyncio.wait_for(self._steps(), self.scenario.timeout)
            except TimeoutError:
                self.error = f"the scenario ran past its timeout of {self.scenario.timeout} s"
            await self._drain()
            self.record_final_files()
        finally:
            await _to_the_end(self.close())

    def add_client(self, spec: ClientSpec) -> None:
        if spec.dsh:
            self.clients[spec.name] = DshClient(
                spec, lambda: self.backend.dsh_http(spec), self.recorder
            )
            return
        if spec.machine is not None:  # api: machine, to a control-mode agent
            self.clients[spec.name] = ScenarioClient(
                spec, lambda: self.backend.open_machine_client(spec), self.recorder
            )
            return
        self.clients[spec.name] = ScenarioClient(
            spec, lambda: self.backend.open_session_client(spec), self.recorder
        )

    async def close(self) -> None:
        """Close the clients and tear the backend down."""
        for client in self.clients.values():
            await client.close()
        await self.backend.teardown()

    def begin_step(self, step: Step) -> None:
        """Mark where a step starts in the history (expects look from here)."""
        self._step_started[step.index] = len(self.recorder.history)
        if step.kind not in _PASSIVE_STEPS:
            self._action_started = len(self.recorder.history)

    async def _steps(self) -> None:
        for step in self.scenario.steps:
            self.begin_step(step)
            skip = self.not_applicable_because(step)
            if skip is not None:
                self.not_applicable.append(f"step {step.index} ({step.describe()}): {skip}")
                self.recorder.event("runner", "not_applicable", {"index": step.index, "why": skip})
                continue
            self.recorder.event(
                "runner",
                "step",
                {"index": step.index, "name": step.kind, "detail": _text(step.args)},
            )
            try:
                await self.run_step(step)
            except StepFailed as failed:
                self.step_failure = f"step {step.index} ({step.describe()}): {failed}"
                hint = self._journal_hint(step)
                if hint:
                    self.step_failure += f" ({hint})"
                    self.step_unjudged = True
                kind = "assert_failed" if step.kind == "assert" else "expect_failed"
                self.recorder.event("runner", kind, {"index": step.index, "why": str(failed)})
                return
            except BackendError as exc:
                self.error = f"step {step.index} ({step.describe()}): {exc}"
                return
            except NotApplicable as exc:
                self.inapplicable = f"step {step.index} ({step.describe()}): {exc}"
                self.recorder.event(
                    "runner",
                    "not_applicable",
                    {"index": step.index, "why": str(exc), "scenario": True},
                )
                return

    async def run_step(self, step: Step) -> None:
        backend, args = self.backend, step.args
        kind = step.kind
        if kind == "start":
            await backend.start(args)
        elif kind == "stop":
            await backend.stop(args)
        elif kind == "kill":
            await backend.kill(args)
        elif kind == "restart":
            await backend.restart(args)
        elif kind == "pause":
            await backend.pause(args)
        elif kind == "resume":
            await backend.resume(args)
        elif kind == "partition":
            direction = args.get("direction", "both")
            self._fault_event("fault_start", "partition", args["agent"], {"direction": direction})
            await backend.partition(args["agent"], direction)
        elif kind == "heal":
            agent = None if args == "all" else args["agent"]
            await backend.heal(agent)
            self._fault_event("fault_stop", "partition", agent or "all", {})
        elif kind == "fault":
            params = {k: v for k, v in args.items() if k not in ("agent", "kind")}
            self._fault_event("fault_start", args["kind"], args["agent"], params)
            await backend.fault(args["agent"], args["kind"], params)
        elif kind == "clear":
            agent = None if args == "all" else args["agent"]
            await backend.clear(agent)
            self._fault_event("fault_stop", "faults", agent or "all", {})
        elif kind == "send":
            client = self.clients[args["client"]]
            assert isinstance(client, ScenarioClient)
            await client.send(str(args["id"]), args["type"], dict(args.get("payload") or {}))
        elif kind in control_steps.STEP_KINDS:
            try:
                await self.control.run_step(step)
            except control_steps.StepFailed as failed:
                raise StepFailed(str(failed)) from None
        elif kind in dsh_steps.STEP_KINDS:
            try:
                await self.dsh.run_step(step)
            except dsh_steps.StepFailed as failed:
                raise StepFailed(str(failed)) from None
        elif kind == "expect":
            await self._expect(step)
        elif kind == "wait":
            await asyncio.sleep(float(args))
        elif kind == "assert":
            self._assert(step)
        elif kind == "revoke":
            users = {c.user for c in self.scenario.topology.clients.values() if c.session == args}
            await backend.revoke(args, next(iter(users), "alice"))
        elif kind == "note":
            self.recorder.event("runner", "note", {"text": _text(args)})
        elif kind in _PLUG_EVENTS:
            if kind == "plug":
                await backend.plug(args["agent"], args["port"])
            else:
                await backend.unplug(args["agent"], args["port"])
            self.recorder.event(
                f"serial:{args['agent']}", _PLUG_EVENTS[kind], {"port": args["port"]}
            )
        elif kind in SERIAL_STEPS:
            await self._serial_request(step)

    # --- the serial I/O extension ----------------------------------------------------

    async def _serial_request(self, step: Step) -> None:
        """A client's SERIAL_* request on a declared port: the port's path on this
        backend, and exactly the fields the step gives."""
        args = step.args
        agent = args["agent"]
        missing = self._serial_missing(agent)
        if missing is not None:
            raise NotApplicable(missing)
        payload = {"port": self.backend.serial_path(agent, args["port"])}
        payload.update(
            {k: v for k, v in args.items() if k not in ("client", "id", "port", "agent")}
        )
        client = self.clients[args["client"]]
        await client.send(str(args["id"]), SERIAL_STEPS[step.kind], payload)

    def _serial_missing(self, agent: str) -> str | None:
        """Why the extension cannot be used with `agent`, judged from its link: the
        HELLO of the connection the hub accepted last does not offer it, or the
        HELLO_ACK does not grant it. A third-party part that does not is a
        target the scenario does not apply to; Tetherbed's own failing to is a
        failure. None: it was negotiated, or nothing was accepted yet (the
        request then shows what the hub does)."""
        self.backend.sync()
        link = wire.process_of(agent)
        offered: dict[Any, list[Any]] = {}
        accepted: tuple[Any, list[Any]] | None = None
        for record in self.recorder.history.records:
            if record.process != link or record.type != "event" or record.f != wire.FRAME:
                continue
            value = record.value if isinstance(record.value, dict) else {}
            payload = value.get("payload") if isinstance(value.get("payload"), dict) else {}
            if value.get("type") == "HELLO" and value.get("dir") == wire.UP:
                offered[value.get("conn")] = list(payload.get("capabilities") or [])
            elif value.get("type") == "HELLO_ACK" and value.get("dir") == wire.DOWN:
                accepted = (value.get("conn"), list(payload.get("granted_capabilities") or []))
        if accepted is None:
            return None
        conn, granted = accepted
        wanted = serial_io.CAPABILITY
        if wanted not in offered.get(conn, []):
            why = f"{agent}'s HELLO does not offer the serial I/O extension ({wanted})"
            if not self.backend.third_party(agent):
                raise StepFailed(f"{why}, though Tetherbed's own agent has serial ports")
            return why
        if wanted not in granted:
            why = f"the hub's HELLO_ACK does not grant {wanted} to {agent}"
            if not self.backend.third_party("hub"):
                raise StepFailed(f"{why}, though Tetherbed's own hub knows the extension")
            return why
        return None

    # --- reference-only steps --------------------------------------------------------

    def not_applicable_because(self, step: Step) -> str | None:
        """Why a step marked `reference_only` does not apply to this target (None: it does)."""
        args = step.args
        if step.kind not in ("expect", "assert") or not isinstance(args, dict):
            return None
        if not args.get("reference_only"):
            return None
        third = [part for part in self._parts(step) if self.backend.third_party(part)]
        if not third:
            return None
        names = ", ".join("the hub" if p == "hub" else p for p in third)
        return f"reference-only, and {names} {'is a' if len(third) == 1 else 'are'} third-party"

    def _parts(self, step: Step) -> list[str]:
        """The hub and agents whose own evidence (journal, exit code) a step reads."""
        args = dict(step.args)
        spec = args.get("count") if isinstance(args.get("count"), dict) else args
        everyone = ["hub", *self.scenario.topology.agents]
        if "credentials_stored" in args:
            return ["hub"]
        if "computer" in args:  # presence, read through the hub's API
            return ["hub"]
        if "agent" in args and "event" not in args and "count" not in args:
            return [args["agent"]]
        process = spec.get("process")
        if process is None:
            return everyone
        if process == "hub":
            return ["hub"]
        if isinstance(process, str) and process.startswith("agent:"):
            return [process.split(":", 1)[1]]
        return []

    def _journal_hint(self, step: Step) -> str | None:
        """A failed step that read a third-party part's journal says so."""
        args = step.args if isinstance(step.args, dict) else {}
        if step.kind not in ("expect", "assert") or args.get("reference_only"):
            return None
        reads_journal = "exit_code" in args or "event" in args or "count" in args
        if not reads_journal:
            return None
        third = [p for p in self._parts(step) if self.backend.third_party(p)]
        if not third:
            return None
        return (
            f"{', '.join(third)}: a third-party part writes no Tetherbed journal and keeps "
            "no exit-code convention; mark the step reference_only, or state it from the wire"
        )

    def _fault_event(self, name: str, kind: str, target: str, params: dict[str, Any]) -> None:
        self.recorder.event("fault", name, {"kind": kind, "target": target, **params})

    # --- expect --------------------------------------------------------------------

    async def _expect(self, step: Step) -> None:
        args = dict(step.args)
        args.pop("reference_only", None)
        within = float(args.pop("within", DEFAULT_WITHIN))
        since = self._action_started
        # Where to look from, and whose records: the recorder's index answers
        # without rescanning the history on every new record.
        start, processes = 0, None
        if "client" in args:
            predicate = self._client_predicate(args)
            processes = [f"client:{args['client']}"]
        elif "event" in args:
            predicate = self._event_predicate(args, since)
            start = 0 if args.get("since") == "start" else since
            if isinstance(args.get("process"), str):
                processes = [args["process"]]
        elif "computer" in args:
            try:
                await self.dsh.expect_presence(args, within)
            except dsh_steps.StepFailed as failed:
                raise StepFailed(str(failed)) from None
            return
        else:
            await self._expect_agent(args, within, since)
            return
        try:
            record = await self.recorder.wait_for(
                predicate, within, since=start, processes=processes
            )
        except TimeoutError:
            raise StepFailed(f"nothing matched within {within} s") from None
        self._check_completion(args, record)

    def _client_predicate(self, args: dict[str, Any]) -> Callable[[Record], bool]:
        process = f"client:{args['client']}"
        request_id = str(args["id"])
        # The completion, not a streamed chunk's event recorded under the same req.
        return lambda r: r.process == process and r.req == request_id and r.type in _COMPLETIONS

    def _check_completion(self, args: dict[str, Any], record: Record) -> None:
        if "client" not in args:
            return
        value = record.value or {}
        wanted_outcome = args.get("outcome")
        if wanted_outcome and record.type != wanted_outcome:
            raise StepFailed(f"outcome {record.type} ({_text(value)}), expected {wanted_outcome}")
        if "type" in args and value.get("type") != args["type"]:
            raise StepFailed(
                f"answer {value.get('type')} ({_text(value)}), expected {args['type']}"
            )
        if "code" in args and value.get("code") != args["code"]:
            raise StepFailed(f"code {value.get('code')}, expected {args['code']}")
        for key, expected in (args.get("value") or {}).items():
            if value.get(key) != expected:
                raise StepFailed(f"{key} = {value.get(key)!r}, expected {expected!r}")

    def _event_predicate(self, args: dict[str, Any], since: int) -> Callable[[Record], bool]:
        name = args["event"]
        process = args.get("process")
        session, machine = args.get("session"), args.get("machine")
        fields = args.get("value") or {}
        start = 0 if args.get("since") == "start" else since

        def matches(r: Record) -> bool:
            return (
                r.index >= start
                and r.type == "event"
                and r.f == name
                and (process is None or r.process == process)
                and (session is None or r.session == session)
                and (machine is None or r.machine == machine)
                and holds(r.value, fields)
            )

        return matches

    async def _expect_agent(self, args: dict[str, Any], within: float, since: int) -> None:
        agent = args["agent"]
        process = f"agent:{agent}"
        state = args.get("state")
        exit_code = args.get("exit_code")
        deadline = self.backend.now() + within
        both = (process, wire.process_of(agent))
        while True:
            current = self.backend.state(agent)
            connected = self._connected(process)
            if state == "connected" and connected:
                return
            if state == "disconnected" and not connected:
                return
            if state in ("running", "paused") and current.status == state:
                return
            if (state == "exited" or exit_code is not None) and current.status == "exited":
                if exit_code is None or current.exit_code == exit_code:
                    return
                raise StepFailed(f"{agent} exited with {current.exit_code}, expected {exit_code}")
            remaining = deadline - self.backend.now()
            if remaining <= 0:
                raise StepFailed(
                    f"{agent} is {current.status} (exit {current.exit_code}, "
                    f"connected={connected}), expected {state or f'exit {exit_code}'}"
                )
            with contextlib.suppress(TimeoutError):
                await self.recorder.next_record(min(remaining, 1.0), processes=both)

    def _connected(self, process: str) -> bool:
        """Connected as the wire shows it: a connection the hub accepted (HELLO_ACK
        reached the agent) that no Close or end has finished. Backends that do not
        record the wire fall back on the agent's own journal."""
        if not self.backend.records_wire:
            return self._journal_connected(process)
        agent = process.split(":", 1)[1]
        if self.scenario.topology.agents[agent].sse:
            return self.dsh.connected(agent)
        # The recorder keeps each link's accepted connections as records arrive.
        return bool(self.recorder.index.served.get(wire.process_of(agent)))

    def _journal_connected(self, process: str) -> bool:
        connected = False
        for record in self.recorder.index.by_process.get(process, []):
            if record.type == "event":
                if record.f == "connected":
                    connected = True
                elif record.f in ("lost", "killed", "exited", "stop"):
                    connected = False
        return connected

    # --- assert --------------------------------------------------------------------

    def _assert(self, step: Step) -> None:
        self.backend.sync()
        args = step.args
        if "count" in args:
            spec = args["count"]
            since = self._step_started.get(int(spec.get("since_step", 0)), 0)
            records = [
                r
                for r in self.recorder.history.records[since:]
                if r.type == "event"
                and r.f == spec["event"]
                and (spec.get("process") is None or r.process == spec["process"])
                and holds(r.value, spec.get("value") or {})
            ]
            count = len(records)
            for bound, ok in (
                ("equals", lambda n, b: n == b),
                ("at_most", lambda n, b: n <= b),
                ("at_least", lambda n, b: n >= b),
            ):
                if bound in args and not ok(count, args[bound]):
                    raise StepFailed(
                        f"{count} {spec['event']} events, expected {bound} {args[bound]}"
                    )
        if "file" in args:
            spec = args["file"]
            agent = self.scenario.topology.agents[spec["agent"]]
            path = self.backend.agent_root(agent) / spec["path"]
            if "content" in spec:
                actual = path.read_text(encoding="utf-8") if path.exists() else None
                if actual != spec["content"]:
                    raise StepFailed(
                        f"{spec['path']} holds {actual!r}, expected {spec['content']!r}"
                    )
            if "exists" in spec and path.exists() != spec["exists"]:
                raise StepFailed(
                    f"{spec['path']} exists={path.exists()}, expected {spec['exists']}"
                )
        if "credentials_stored" in args:
            try:
                self.dsh.check_stored_credentials()
            except dsh_steps.StepFailed as failed:
                raise StepFailed(str(failed)) from None
        if "agent" in args:
            current = self.backend.state(args["agent"])
            if "status" in args and current.status != args["status"]:
                raise StepFailed(f"{args['agent']} is {current.status}, expected {args['status']}")
            if "exit_code" in args and current.exit_code != args["exit_code"]:
                raise StepFailed(
                    f"{args['agent']} exit {current.exit_code}, expected {args['exit_code']}"
                )

    # --- the end of a run -----------------------------------------------------------

    async def _drain(self) -> None:
        """Give outstanding requests time to be answered (the hub always answers)."""
        deadline = self.backend.now() + DRAIN_SECONDS
        while any(c.outstanding for c in self.clients.values()):
            if self.backend.now() >= deadline:
                return
            with contextlib.suppress(TimeoutError):
                await self.recorder.next_record(
                    min(deadline - self.backend.now(), 5.0), lambda r: r.type != "event"
                )

    def record_final_files(self) -> None:
        """What each session's files hold now, on the machine that served it last."""
        written: dict[str, set[str]] = {}
        for record in self.recorder.history.records:
            if record.type == "invoke" and record.f == "FILE_WRITE" and record.session:
                path = (record.value or {}).get("payload", {}).get("path")
                if isinstance(path, str):
                    written.setdefault(record.session, set()).add(path)
        for session, paths in sorted(written.items()):
            agent = self._last_agent_of(session)
            if agent is None:
                continue
            root = self.backend.agent_root(agent)
            for path in sorted(paths):
                target = root / path.lstrip("/")
                data = target.read_bytes() if target.is_file() else None
                self.recorder.event(
                    "runner",
                    "final_file",
                    {
                        "path": path,
                        "exists": data is not None,
                        "content": data.decode("utf-8", "replace") if data is not None else None,
                        "digest": hashlib.sha256(data).hexdigest()[:16]
                        if data is not None
                        else None,
                        "agent": agent.name,
                    },
                    session=session,
                )

    def _last_agent_of(self, session: str) -> Any:
        """The agent that served the session last: the last one the hub accepted
        (HELLO_ACK on its link; its journal on backends without a wire recording)."""
        agents = {a.name: a for a in self.scenario.topology.agents.values() if a.session == session}
        last = None
        for record in self.recorder.history.records:
            name = wire.node_of(record.process)
            value = record.value if isinstance(record.value, dict) else {}
            if name is not None:
                served = record.f == wire.FRAME and value.get("type") == "HELLO_ACK"
            elif record.process.startswith("agent:") and not self.backend.records_wire:
                name, served = record.process.split(":", 1)[1], record.f == "connected"
            else:
                continue
            if served and name in agents:
                last = agents[name]
        return last or next(iter(agents.values()), None)


def holds(actual: Any, wanted: Any) -> bool:
    """`wanted` is a part of `actual`: every key it names, recursively, has that
    value (`value: {payload: {reason: user_revoked}}` matches a larger payload)."""
    if isinstance(wanted, dict):
        if not isinstance(actual, dict):
            return False
        return all(key in actual and holds(actual[key], value) for key, value in wanted.items())
    return actual == wanted


async def _to_the_end(closing: Coroutine[Any, Any, None]) -> None:
    """Finish tearing down even if the run is cancelled meanwhile (a signal):
    stopping half the parts would leave the rest running. The cancellation
    is passed on once everything is stopped."""
    task = asyncio.ensure_future(closing)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    task.result()
    if cancelled:
        raise asyncio.CancelledError


def _text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 200 else text[:197] + "..."
