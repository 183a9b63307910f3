"""SSE agents from Python: the `Testbed` steps for dsh-computers, on the sim backend."""

from __future__ import annotations

from pathlib import Path

from tetherbed.simulator.scenario import check_topology
from tetherbed.simulator.testbed import Testbed
from tetherbed.simulator.validation import Where


def test_enroll_exec_rename_and_delete_kicks_the_stream(tmp_path: Path) -> None:
    topology = check_topology(
        {
            "hub": {"options": {"dsh": {"heartbeat_ms": 2000}}},
            "agents": {"desk": {"transport": "sse"}, "laptop": {"session": "s"}},
            "clients": {"alice": {"api": "dsh"}, "bob": {"session": "s"}},
        },
        Where("test"),
    )
    checkers = ("dsh_presence", "dsh_exec_answers", "exactly_one_answer")
    bed = Testbed(topology, workdir=tmp_path, checkers=checkers)
    try:
        bed.start("hub")
        bed.start("laptop")  # a WebSocket agent on the same hub, at the same time
        bed.create_key("alice", "k1")
        bed.enroll("desk", "k1")
        bed.start("desk")
        bed.expect(agent="desk", state="connected")
        bed.expect(agent="laptop", state="connected")
        bed.expect(computer="desk", online=True)
        request = bed.exec("alice", "desk", "echo hi")
        bed.expect(client="alice", id=request, outcome="ok", value={"stdout": "hi\n"})
        bed.rename_computer("alice", "desk", "Desk PC")
        bed.expect(event="sse_event", process="wire:desk", value={"event": "config"})
        bed.delete_computer("alice", "desk")
        bed.expect(event="sse_end", process="wire:desk", value={"how": "ended"})
        # §11.6.6: its token is dead; the agent's reconnect gets 401 and it stops.
        bed.expect(event="http_response", process="wire:desk", value={"status": 401})
        bed.expect(agent="desk", state="exited", exit_code=3)
        assert all(v.ok for v in bed.check()), [v.to_dict() for v in bed.check()]
    finally:
        bed.close()
