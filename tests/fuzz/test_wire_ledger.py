"""The stateful machine's ledger judges frames alone: each invariant breaks on
the frames that break it, and holds on the frames that keep it."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import msgspec
import pytest

from tetherbed.simulator.fuzz.stateful import (
    AT_MOST_ONCE,
    DEADLINE,
    EXACTLY_ONE_ANSWER,
    ONE_OWNER,
    REVOKED,
    TYPED,
    InvariantViolated,
    WireLedger,
)


def frame(kind: str, ident: str | None, **payload: object) -> bytes:
    return msgspec.json.encode({"type": kind, "id": ident, "payload": payload})


def sent(ledger: WireLedger, kind: str = "FILE_STAT", session: str = "s1") -> str:
    tag = ledger.new_tag()
    ledger.client_sent(tag, "c1", f"r-{tag}", kind, now=0.0, session=session)
    return tag


def broken(invariant: str) -> AbstractContextManager[Any]:
    return pytest.raises(InvariantViolated, match=rf"^\[{invariant}\]")


def test_a_second_terminal_answer_breaks_exactly_one_answer() -> None:
    ledger = WireLedger()
    tag = sent(ledger)
    ledger.hub_sent_to_client("c1", frame("FILE_STAT_RESPONSE", f"r-{tag}", exists=False), 1.0)
    with broken(EXACTLY_ONE_ANSWER):
        ledger.hub_sent_to_client("c1", frame("ERROR", f"r-{tag}", code="AGENT_TIMEOUT"), 2.0)


def test_streamed_chunks_are_not_answers() -> None:
    ledger = WireLedger()
    tag = sent(ledger, "LOCAL_LLM_COMPLETION")
    ledger.hub_sent_to_client("c1", frame("LOCAL_LLM_COMPLETION_CHUNK", f"r-{tag}"), 1.0)
    ledger.hub_sent_to_client("c1", frame("LOCAL_LLM_COMPLETION_RESPONSE", f"r-{tag}"), 1.0)
    ledger.check_all_answered()


def test_an_unanswered_request_breaks_exactly_one_answer_once_settled() -> None:
    ledger = WireLedger()
    sent(ledger)
    with broken(EXACTLY_ONE_ANSWER):
        ledger.check_all_answered()


def test_two_acknowledged_connections_of_one_session_break_one_owner() -> None:
    ledger = WireLedger()
    for name in ("a1", "a2"):
        ledger.connected(name, "s1", "m1")
    ledger.hub_sent_to_agent("a1", frame("HELLO_ACK", "h"), 0.0, 60.0)
    ledger.hub_closed("a1")  # a takeover closes the old owner first
    ledger.hub_sent_to_agent("a2", frame("HELLO_ACK", "h"), 0.0, 60.0)
    ledger.connected("a3", "s1", "m1")
    with broken(ONE_OWNER):
        ledger.hub_sent_to_agent("a3", frame("HELLO_ACK", "h"), 0.0, 60.0)


def test_a_request_held_past_its_deadline_breaks_the_deadline() -> None:
    ledger = WireLedger()
    ledger.connected("a1", "s1", "m1")
    tag = sent(ledger)
    ledger.hub_sent_to_agent("a1", frame("FILE_STAT", "h1", path=f"/w/{tag}"), 0.0, 60.0)
    ledger.check_deadlines(60.0)
    with broken(DEADLINE):
        ledger.check_deadlines(60.5)


def test_a_revoked_session_admits_no_one() -> None:
    ledger = WireLedger()
    ledger.connected("a1", "s1", "m1")
    ledger.revoked("s1", 0.0)
    with broken(REVOKED):
        ledger.hub_sent_to_agent("a1", frame("HELLO_ACK", "h"), 1.0, 60.0)


def test_a_non_idempotent_request_admitted_twice_breaks_at_most_once() -> None:
    ledger = WireLedger()
    tag = sent(ledger, "FILE_MOVE")
    payload = msgspec.json.encode({"src": f"/w/{tag}", "dst": "/w/x"})
    ledger.agent_admitted("a1", "FILE_MOVE", payload)
    with broken(AT_MOST_ONCE):
        ledger.agent_admitted("a2", "FILE_MOVE", payload)
    ledger.agent_refused_unrun(payload)  # refused as busy: it ran nothing
    ledger.agent_admitted("a2", "FILE_MOVE", payload)


def test_a_refusal_without_a_spec_code_breaks_typed_refusals() -> None:
    ledger = WireLedger()
    tag = sent(ledger)
    with broken(TYPED):
        ledger.hub_sent_to_client("c1", frame("ERROR", f"r-{tag}", code="OOPS"), 1.0)
