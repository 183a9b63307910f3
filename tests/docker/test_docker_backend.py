"""The `docker` backend: shipped scenarios in containers, its fault mapping, its clean-up.

Every run goes through the same entry points users have (`run_scenario`, or a
`Testbed`), with the images the session fixture built, and must leave no
container or network of this process behind. Nothing is skipped: a failed
build, or a container that does not come up, fails with the reason.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tetherbed.simulator.backends.docker.network import RUN_LABEL, new_run_id
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.runner import RunOutcome, run_scenario
from tetherbed.simulator.scenario import load
from tetherbed.simulator.testbed import Testbed, topology

# One xdist worker runs every docker test (they share one image build).
pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("docker"), pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
OWN_SCENARIOS = Path(__file__).parent / "scenarios"
#: This process's runs are named tb-[worker-]<pid>-<random>.
RUN_PREFIX = new_run_id().rsplit("-", 1)[0] + "-"


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def built_images(images: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend takes the exact tags the session fixture built, not `:latest`."""
    for key in ("TETHERBED_HUB_IMAGE", "TETHERBED_MACHINE_IMAGE"):
        monkeypatch.setenv(key, images[key])


@pytest.fixture(autouse=True)
def nothing_left_behind(engine: docker.DockerClient) -> Iterator[None]:
    yield
    assert _leftovers(engine) == {"containers": [], "networks": []}


def _leftovers(engine: docker.DockerClient) -> dict[str, list[str]]:
    def ours(labels: dict[str, str] | None) -> bool:
        return (labels or {}).get(RUN_LABEL, "").startswith(RUN_PREFIX)

    return {
        "containers": [
            c["Names"][0].lstrip("/")
            for c in engine.api.containers(all=True, filters={"label": RUN_LABEL})
            if ours(c.get("Labels"))
        ],
        "networks": [
            n.name for n in engine.networks.list(filters={"label": RUN_LABEL})
            if ours(n.attrs.get("Labels"))
        ],
    }  # fmt: skip


def run(path: Path, workdir: Path) -> RunOutcome:
    scenario = load(path)
    outcome = run_scenario(scenario, "docker", scenario.seed, workdir)
    assert outcome.ok, explain(outcome)
    return outcome


def explain(outcome: RunOutcome) -> str:
    """Why a run failed, with the part of the history that shows it."""
    lines = [f"{outcome.scenario.name} on docker ({outcome.seconds:.1f} s)"]
    lines += [f"error: {outcome.error}"] if outcome.error else []
    lines += [f"step: {outcome.step_failure}"] if outcome.step_failure else []
    for verdict in outcome.verdicts:
        if not verdict.ok:
            lines.append(f"{verdict.name}: {verdict.summary}")
            lines += [f"    {json.dumps(e, default=str)[:300]}" for e in verdict.evidence[:5]]
    lines.append("history (last 60 records):")
    lines += [
        f"  {r.time:8.3f} {r.process:20} {r.type:6} {r.f} {json.dumps(r.value, default=str)[:140]}"
        for r in outcome.history.records[-60:]
    ]
    return "\n".join(lines)


def events(history: History, process: str, name: str, after: float = -1.0) -> list[Record]:
    return [
        r
        for r in history.records
        if r.process == process and r.type == "event" and r.f == name and r.time > after
    ]


def step_time(history: History, kind: str) -> float:
    """When the first runner step of this kind began."""
    for record in history.records:
        if record.process == "runner" and record.f == "step" and record.value["name"] == kind:
            return record.time
    raise AssertionError(f"no {kind} step in the history")


def verdict(outcome: RunOutcome, name: str) -> str:
    (found,) = [v for v in outcome.verdicts if v.name == name]
    assert found.ok, found
    return found.summary


def checked_delays(outcome: RunOutcome) -> int:
    """How many reconnect delays backoff_bounds judged (from its summary)."""
    match = re.match(r"(\d+) reconnect delay", verdict(outcome, "backoff_bounds"))
    assert match, verdict(outcome, "backoff_bounds")
    return int(match[1])


# --- the scenarios the issue names ---------------------------------------------------


def test_split_brain_between_two_machine_containers(tmp_path: Path) -> None:
    outcome = run(SCENARIOS / "different_machine_split_brain.yaml", tmp_path)
    history = outcome.history
    started = {
        name: events(history, f"agent:{name}", "started")[0].value["container"]
        for name in ("laptop-a", "laptop-b")
    }
    assert started["laptop-a"] != started["laptop-b"]  # two containers, two machines
    (refusal,) = events(history, "hub", "takeover_rejected")
    assert refusal.machine == "laptop-b" and refusal.value["reserved_for"] is None
    assert [r.value["code"] for r in events(history, "agent:laptop-b", "exited")] == [27]
    assert events(history, "agent:laptop-a", "exited") == []
    verdict(outcome, "single_owner")


def test_partition_race_reconnects_after_the_heal_on_schedule(tmp_path: Path) -> None:
    outcome = run(SCENARIOS / "partition_race.yaml", tmp_path)
    history = outcome.history
    healed = step_time(history, "heal")
    assert events(history, "hub", "pong_timeout")
    # The heal brings the hub's close through; the agent backs off once and is back.
    (delay,) = events(history, "agent:laptop-a", "backoff", after=healed)
    assert delay.value["attempt"] == 0
    assert events(history, "agent:laptop-a", "connected", after=healed)
    assert checked_delays(outcome) >= 1


def test_partition_heal_goes_through_two_backoff_delays(tmp_path: Path) -> None:
    outcome = run(OWN_SCENARIOS / "partition_heal_reconnect.yaml", tmp_path)
    history = outcome.history
    cut, healed = step_time(history, "partition"), step_time(history, "heal")
    delays = events(history, "agent:laptop", "backoff", after=cut)
    assert [d.value["attempt"] for d in delays[:2]] == [0, 1]
    failed_attempts = events(history, "agent:laptop", "attempt", after=cut)
    assert any(cut < a.time < healed for a in failed_attempts)  # tried into the partition
    reconnected = events(history, "agent:laptop", "connected", after=healed)
    assert reconnected and reconnected[0].time - healed < 8.0  # the backoff then in progress
    assert checked_delays(outcome) >= 2


def test_takeover_while_the_first_container_is_paused(tmp_path: Path) -> None:
    outcome = run(SCENARIOS / "same_machine_takeover_after_sleep.yaml", tmp_path)
    history = outcome.history
    (paused,) = events(history, "agent:laptop", "paused")
    (resumed,) = events(history, "agent:laptop", "resumed")
    (takeover,) = events(history, "hub", "takeover")
    (revoked,) = events(history, "agent:laptop", "revoked")
    # Frozen while the hub handed the session over; it reads the revocation on waking.
    assert paused.time < takeover.time < resumed.time <= revoked.time
    assert revoked.value["reason"] == "another_shim_connected"
    assert [r.value["code"] for r in events(history, "agent:laptop", "exited")] == [28]


def test_hub_container_restart_and_reconnect_schedule(tmp_path: Path) -> None:
    outcome = run(SCENARIOS / "reconnect_after_hub_restart.yaml", tmp_path)
    history = outcome.history
    starts = events(history, "hub", "started")
    assert len(starts) == 2
    # The same container again: its state folder, alias and address stay.
    assert starts[0].value["container"] == starts[1].value["container"]
    assert events(history, "hub", "killed")
    assert [r.value["code"] for r in events(history, "hub", "exited")] == [137]
    for worker in ("worker-1", "worker-2"):
        down = events(history, f"agent:{worker}", "backoff", after=starts[0].time)
        assert len(down) >= 3
        assert events(history, f"agent:{worker}", "connected", after=starts[1].time)
    assert checked_delays(outcome) >= 6


# --- the fault mapping ---------------------------------------------------------------


def _timed(tb: Testbed, client: str) -> tuple[Record, float]:
    started = time.monotonic()
    record = tb.request(client, "FILE_LIST", {"path": "."})
    return record, time.monotonic() - started


def test_faults_restart_and_graceful_stop_through_a_testbed(tmp_path: Path) -> None:
    tb = Testbed(
        topology(
            hub={"ping_interval": 30, "pong_timeout": 30},
            agents={"box": {"machine": "box-1", "session": "s1", "options": {"shell": True}}},
            clients={"alice": {"session": "s1"}},
        ),
        backend="docker",
        workdir=tmp_path,
        name="docker faults",
    )
    try:
        tb.start("hub")
        tb.start("box")
        tb.expect(agent="box", state="connected")
        answer = tb.request("alice", "EXECUTE_COMMAND", {"command": "hostname; pwd"})
        assert answer.type == "ok" and answer.value["stdout"] == "box-1\n/workspace\n"
        _, quick = _timed(tb, "alice")

        # latency both ways: netem where the kernel has it, else the proxy's toxic.
        tb.fault("box", "latency", latency_ms=400, jitter_ms=0)
        (via,) = events(tb.history, "fault", "fault_via")
        assert via.value["via"] in ("netem", "proxy (this kernel has no netem)")
        record, slow = _timed(tb, "alice")
        assert record.type == "ok" and slow >= 0.75, (quick, slow)
        tb.clear("box")
        _, fast = _timed(tb, "alice")
        assert fast < 0.4, fast

        # loss (docker only): iptables drops every packet to the hub; TCP
        # retransmits once it is cleared, and the request goes through.
        tb.fault("box", "loss", percent=100, direction="to_hub")
        lost = tb.send("alice", "FILE_LIST", {"path": "."})
        tb.wait(1.5)
        assert not _completed(tb, lost)
        tb.clear("box")
        tb.expect(client="alice", id=lost, outcome="ok", within=30)

        # one-way partition (the proxy holds what comes from the hub), then heal.
        tb.partition("box", "from_hub")
        held = tb.send("alice", "FILE_LIST", {"path": "."})
        tb.wait(1.0)
        assert not _completed(tb, held)
        tb.heal("box")
        tb.expect(client="alice", id=held, outcome="ok", within=10)

        # restart = docker kill + docker start of the same container; its link stays.
        tb.restart("box")
        tb.expect(agent="box", state="connected")
        starts = events(tb.history, "agent:box", "started")
        assert len(starts) == 2 and starts[0].value == starts[1].value
        assert [r.value["code"] for r in events(tb.history, "agent:box", "exited")] == [137]

        # docker stop = SIGTERM to the agent itself: it closes 1000 and exits 0.
        tb.stop("box")
        assert (tb.state("box").status, tb.state("box").exit_code) == ("exited", 0)
        tb.expect(event="disconnect", process="hub", value={"code": 1000}, since="start", within=5)
        verdicts = tb.check()
        assert not any(v.failed or v.error is not None for v in verdicts), verdicts
        assert {v.name for v in verdicts if v.ok} >= {"single_owner", "exactly_one_answer"}
    finally:
        tb.close()


def _completed(tb: Testbed, request_id: str) -> bool:
    return any(
        r.req == request_id and r.type != "invoke" and r.process == "client:alice"
        for r in tb.history.records
    )


# --- failures are reported, and clean up ------------------------------------------------


def test_a_failing_step_still_removes_every_container_and_network(tmp_path: Path) -> None:
    scenario = tmp_path / "fails.yaml"
    scenario.write_text(
        "name: fails on purpose\n"
        "topology: {agents: {a: {session: s}}}\n"
        "steps:\n"
        "  - start: hub\n"
        "  - start: a\n"
        "  - expect: {agent: a, exit_code: 99, within: 2}\n"
    )
    outcome = run_scenario(load(scenario), "docker", 1, tmp_path / "run")
    assert not outcome.ok and outcome.step_failure and "expected exit 99" in outcome.step_failure
    # (nothing_left_behind checks the clean-up)


def test_a_missing_image_fails_with_the_way_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHERBED_HUB_IMAGE", "tetherbed/hub:not-built-here")
    outcome = run_scenario(load(SCENARIOS / "version_mismatch.yaml"), "docker", 1, tmp_path)
    assert outcome.error and "tetherbed/hub:not-built-here" in outcome.error
    assert "make images" in outcome.error


def test_sigterm_to_a_docker_run_removes_its_containers_and_networks(
    tmp_path: Path, engine: docker.DockerClient
) -> None:
    """What a CI cancel sends: the run stops, and nothing of it stays in Docker."""
    import os
    import signal
    import subprocess
    import sys

    scenario = tmp_path / "long.yaml"
    scenario.write_text(
        "name: interrupted in containers\n"
        "topology: {agents: {a: {session: s}}}\n"
        "steps:\n"
        "  - start: hub\n"
        "  - start: a\n"
        "  - expect: {agent: a, state: connected, within: 60}\n"
        "  - wait: 600\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    report = tmp_path / "report"
    run = subprocess.Popen(
        [sys.executable, "-m", "tetherbed", "run", str(scenario), "--backend", "docker",
         "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )  # fmt: skip
    prefix = f"tb-{run.pid}-"

    def mine() -> list[str]:
        # The low-level listing: one call, no inspect per container, so a
        # container another test removes meanwhile cannot make it fail (404).
        listed = engine.api.containers(all=True, filters={"label": RUN_LABEL})
        return [
            c["Names"][0].lstrip("/")
            for c in listed
            if (c.get("Labels") or {}).get(RUN_LABEL, "").startswith(prefix)
        ]

    try:
        deadline = time.monotonic() + 180
        while len(mine()) < 3:  # the hub, the agent and its link
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the run's containers did not start"
            time.sleep(0.5)
        time.sleep(2.0)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 128 + signal.SIGTERM, out + err
    assert mine() == []
    networks = [
        n.name for n in engine.networks.list(filters={"label": RUN_LABEL})
        if (n.attrs.get("Labels") or {}).get(RUN_LABEL, "").startswith(prefix)
    ]  # fmt: skip
    assert networks == []
    (result,) = json.loads((report / "results.json").read_text())["runs"]
    assert result["verdict"] == "error" and "stopped by SIGTERM" in result["error"]
