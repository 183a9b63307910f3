"""Seeded exploration on the sim backend: seeds pick interleavings, a seed replays its own.

The five race scenarios must each show at least five interleavings over 40
seeds (with the order of events fixed by the step list alone, each had one),
a seed must give a byte-identical history every time, and `tetherbed run
--seeds` must report the interleavings, the failures and their replay
commands, exiting 1 when a seed failed.
"""

from __future__ import annotations

import asyncio
import json
import random
import shlex
from pathlib import Path

import pytest

from tetherbed.simulator.cli import main as run
from tetherbed.simulator.explore.interleaving import diff, fingerprint, steps
from tetherbed.simulator.explore.seeds import SeedsError, describe_seeds, parse_seeds, sweep
from tetherbed.simulator.history import History
from tetherbed.simulator.recorder import Recorder
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import load
from tetherbed.simulator.virtual_time import VirtualTimeLoop, owned_by

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"
FAILING = ROOT / "tests" / "fixtures" / "failing_lost_write.yaml"
RACES = [
    "partition_race.yaml",
    "same_machine_takeover_after_sleep.yaml",
    "in_flight_across_disconnect.yaml",
    "different_machine_split_brain.yaml",
    "version_mismatch.yaml",
]


# --- --seeds ------------------------------------------------------------------------


def test_seed_forms() -> None:
    assert parse_seeds("1..5") == [1, 2, 3, 4, 5]
    assert parse_seeds("7") == [7]
    assert parse_seeds("1,5,9") == [1, 5, 9]
    assert parse_seeds("1..3, 9, 2") == [1, 2, 3, 9]
    assert describe_seeds([1, 2, 3, 9, 11, 12]) == "1..3,9,11..12"


@pytest.mark.parametrize("text", ["", "5..1", "a..b", "1,,2", "x", "1..1000000"])
def test_bad_seeds_are_refused_with_a_reason(text: str) -> None:
    with pytest.raises(SeedsError, match="--seeds"):
        parse_seeds(text)


# --- the interleaving ---------------------------------------------------------------


def _wire(history: History, time: float, conn: str, f: str, **value: object) -> None:
    history.append(
        time, f"wire:{conn.split('#', maxsplit=1)[0]}", "event", f, {"conn": conn, **value}
    )


def test_the_fingerprint_ignores_times_and_random_ids_but_not_order() -> None:
    first, second, swapped = History(), History(), History()
    _wire(first, 0.1, "a#1", "frame", dir="up", type="HELLO", id="uuid-1")
    _wire(first, 0.2, "b#1", "connect")
    _wire(second, 7.0, "a#1", "frame", dir="up", type="HELLO", id="uuid-other")
    _wire(second, 9.5, "b#1", "connect")
    _wire(swapped, 0.1, "b#1", "connect")
    _wire(swapped, 0.2, "a#1", "frame", dir="up", type="HELLO", id="uuid-1")
    second.append(8.0, "hub", "event", "hello", {})  # not the wire: not the interleaving
    assert fingerprint(first) == fingerprint(second)
    assert fingerprint(first) != fingerprint(swapped)
    assert steps(first) == ["a#1 frame dir=up type=HELLO id=@1", "b#1 connect"]
    assert "-b#1 connect" in diff(steps(first), steps(swapped))


def test_closes_count_with_their_code() -> None:
    normal, fatal = History(), History()
    _wire(normal, 1.0, "a#1", "close", dir="down", code=1000)
    _wire(fatal, 1.0, "a#1", "close", dir="down", code=4427)
    assert fingerprint(normal) != fingerprint(fatal)


# --- the seeded scheduler -----------------------------------------------------------


def _order(seed: int | None) -> list[str]:
    """Three owners each append three marks at one instant."""
    done: list[str] = []

    async def node(name: str) -> None:
        for n in range(3):
            done.append(f"{name}{n}")
            await asyncio.sleep(0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(node(name), context=owned_by(name)) for name in "abc"]
        await asyncio.gather(*tasks)

    loop = VirtualTimeLoop(schedule=None if seed is None else random.Random(seed))
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return done


def test_owners_interleave_by_seed_and_each_keeps_its_own_order() -> None:
    orders = {tuple(_order(seed)) for seed in range(30)}
    assert len(orders) >= 5
    for order in orders:
        for name in "abc":
            assert [m for m in order if m.startswith(name)] == [f"{name}{n}" for n in range(3)]
    assert _order(4) == _order(4)
    assert _order(None) == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]


# --- on the shipped race scenarios ---------------------------------------------------


@pytest.mark.parametrize("name", RACES)
def test_forty_seeds_explore_at_least_five_interleavings(name: str) -> None:
    result = sweep(SCENARIOS / name, list(range(1, 41)), "sim")
    assert not result.failures, [(r.seed, r.why) for r in result.failures]
    assert len(result.interleavings) >= 5, result.interleavings


def test_a_seed_gives_a_byte_identical_history(tmp_path: Path) -> None:
    scenario = load(SCENARIOS / "partition_race.yaml", "sim")
    histories = []
    for n in range(2):
        outcome = run_scenario(scenario, "sim", 17, tmp_path / f"run{n}")
        path = tmp_path / f"history{n}.jsonl"
        outcome.history.write(path)
        histories.append(path.read_bytes())
    assert histories[0] == histories[1]
    other = run_scenario(scenario, "sim", 18, tmp_path / "other")
    assert History.read(tmp_path / "history0.jsonl").records != other.history.records


# --- tetherbed run --seeds ------------------------------------------------------------


def test_run_seeds_reports_interleavings_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = SCENARIOS / "version_mismatch.yaml"
    code = run([str(scenario), "--seeds", "1..6", "--json", "--report", str(tmp_path)])
    assert code == 0
    [found] = json.loads(capsys.readouterr().out)
    assert found["runs"] == 6 and found["seeds"] == "1..6"
    assert found["distinct_interleavings"] == len(found["interleavings"]) >= 2
    assert found["failures"] == []
    assert (tmp_path / "seeds.json").is_file()


def test_run_seeds_exits_1_and_prints_each_failures_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run([str(FAILING), "--seeds", "3,4", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    replays = [line.split("replay: ", 1)[1] for line in out.splitlines() if "replay: " in line]
    assert len(replays) == 2
    assert shlex.split(replays[0])[-2:] == ["--seed", "3"]
    assert "2 failures" in out
    # The replay is the run it names: the same verdict, the same interleaving.
    written = [line.split("history: ", 1)[1] for line in out.splitlines() if "history: " in line]
    recorded = History.read(Path(written[0]))
    outcome = run_scenario(load(FAILING, "sim"), "sim", 3, tmp_path / "replay")
    assert outcome.verdict == "fail"
    assert fingerprint(outcome.history) == fingerprint(recorded)


def test_seed_and_seeds_do_not_mix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        run([str(FAILING), "--seed", "1", "--seeds", "1..2"])
    assert stopped.value.code == 2
    assert run([str(FAILING), "--seeds", "9..1"]) == 2
    assert "runs backwards" in capsys.readouterr().err


# --- the recorder's index --------------------------------------------------------------


def test_waiters_on_named_processes_see_only_theirs_and_from_where_they_start() -> None:
    async def main() -> None:
        recorder = Recorder(asyncio.get_running_loop().time)
        recorder.event("wire:a", "connect", {"conn": "a#1"})
        recorder.event("hub", "connect", {"conn": "a#1"})
        found = await recorder.wait_for(lambda r: r.f == "connect", 1, processes=["hub"])
        assert found.process == "hub"
        waiting = asyncio.ensure_future(
            recorder.wait_for(lambda r: r.f == "connect", 5, since=2, processes=["wire:a"])
        )
        await asyncio.sleep(0)
        recorder.event("hub", "connect", {"conn": "a#2"})
        recorder.event("wire:a", "frame", {"conn": "a#2", "dir": "down", "type": "HELLO_ACK"})
        assert recorder.index.served == {"wire:a": {"a#2": None}}
        recorder.event("wire:a", "connect", {"conn": "a#3"})
        assert (await waiting).index == 4
        recorder.event("wire:a", "end", {"conn": "a#2"})
        assert recorder.index.served == {"wire:a": {}}

    asyncio.run(main())


def test_the_interleaving_tool_prints_one_and_diffs_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tetherbed.simulator.explore.interleaving import main as interleaving

    first, swapped = History(), History()
    _wire(first, 0.1, "a#1", "connect")
    _wire(first, 0.2, "b#1", "connect")
    _wire(swapped, 0.1, "b#1", "connect")
    _wire(swapped, 0.2, "a#1", "connect")
    first.write(tmp_path / "a.jsonl")
    swapped.write(tmp_path / "b.jsonl")
    assert interleaving([str(tmp_path / "a.jsonl")]) == 0
    assert "   1 a#1 connect" in capsys.readouterr().out
    assert interleaving([str(tmp_path / "a.jsonl"), str(tmp_path / "a.jsonl")]) == 0
    assert "same interleaving" in capsys.readouterr().out
    assert interleaving([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 1
    assert "+b#1 connect" in capsys.readouterr().out
    assert interleaving([str(tmp_path / "missing.jsonl")]) == 2
