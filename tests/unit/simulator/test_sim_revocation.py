"""Revocation holds on the sim backend: no agent serves a revoked session again."""

from __future__ import annotations

from pathlib import Path

from tetherbed.simulator.scenario import AgentSpec
from tetherbed.simulator.testbed import Testbed, topology


def test_after_revoke_a_new_agent_is_refused_for_good_and_serves_nobody(tmp_path: Path) -> None:
    """Before: the revoke flag was never read; a second agent connected to the
    revoked session and served the client's command."""
    tb = Testbed(
        topology(
            agents={"laptop": {"machine": "m1", "session": "chat"}},
            clients={"alice": {"session": "chat"}},
        ),
        backend="sim",
        workdir=tmp_path,
    )
    try:
        tb.start("hub")
        tb.start("laptop")
        tb.expect(agent="laptop", state="connected")
        tb.revoke("chat")
        tb.expect(agent="laptop", exit_code=28)
        tb.add_agent(AgentSpec("desktop", "m2", "chat", options={"shell": True}))
        tb.start("desktop")
        tb.expect(agent="desktop", exit_code=4)  # 401: stops as for a bad token
        answer = tb.request("alice", "EXECUTE_COMMAND", {"command": "echo served"})
        assert answer.value["code"].startswith("HTTP_403"), answer.value
        executed = [r for r in tb.history.records if r.f == "exec"]
        assert not executed
    finally:
        tb.close()
