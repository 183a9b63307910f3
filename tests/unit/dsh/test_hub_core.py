"""The dsh hub core: enrollment, presence, streams, dispatch, chunks, jobs."""

from __future__ import annotations

import hashlib

import pytest

from tetherbed.hub.dsh.actions import Stream, ToolError
from tetherbed.hub.dsh.core import Answer
from tetherbed.hub.dsh.core import Execution as CoreExecution
from tetherbed.wire.dsh import schema
from tetherbed.wire.dsh.credentials import is_computer_id, is_credential

from .hub_harness import SERVER, Hub, b64

# --- enrollment keys -----------------------------------------------------------


def test_a_key_enrolls_once_and_the_token_is_kept_only_as_its_digest() -> None:
    hub = Hub()
    key = hub.key(os="linux")
    assert is_credential(key)
    first = hub.enroll(key)
    assert first.status == 200
    assert schema.problems(first.body, schema.ENROLL_RESPONSE) == []
    assert is_computer_id(first.body["computerId"])
    token = first.body["token"]
    assert is_credential(token) and token != key
    assert first.body["serverUrl"] == SERVER
    record = hub.core.registry.computers[first.body["computerId"]]
    assert record.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(record)
    again = hub.enroll(key, name="other")
    assert (again.status, again.body["error"]) == (409, "key-used")


def test_a_key_expires_after_fifteen_minutes() -> None:
    hub = Hub()
    early, late = hub.key(), None
    hub.clock.advance(15 * 60 - 1)
    assert hub.enroll(early).status == 200
    late = hub.key()
    hub.clock.advance(15 * 60)
    answer = hub.enroll(late)
    assert (answer.status, answer.body["error"]) == (410, "key-expired")


def test_unknown_and_malformed_keys() -> None:
    hub = Hub()
    assert hub.enroll("dshc_" + "A" * 43).body["error"] == "invalid-key"
    assert hub.enroll("not-a-key").status == 401
    bad = hub.call(hub.core.enroll({"key": 7}, SERVER))
    assert (bad.status, bad.body["error"]) == (400, "bad-request")
    assert "$.key" in bad.body["message"]
    assert hub.call(hub.core.enroll([1, 2], SERVER)).status == 400


def test_a_new_key_uses_up_the_pending_one() -> None:
    hub = Hub()
    first = hub.key()
    second = hub.key()
    assert hub.enroll(first).body["error"] == "key-used"
    assert hub.enroll(second).status == 200
    state = hub.core.state("alice", SERVER)
    assert state["pendingKey"] is None


def test_the_pending_key_is_shown_until_used() -> None:
    hub = Hub()
    key = hub.key(os="windows")
    pending = hub.core.state("alice", SERVER)["pendingKey"]
    assert pending == {"key": key, "expiresAt": pending["expiresAt"], "os": "windows"}
    assert hub.core.state("bob", SERVER)["pendingKey"] is None


def test_create_key_answers_the_install_commands() -> None:
    hub = Hub()
    answer = hub.call(hub.core.create_key("alice", {"os": "macos"}, SERVER))
    body = answer.body
    assert schema.problems(body, schema.KEY_CREATED) == []
    assert body["installUrl"] == f"{SERVER}/api/dsh-computers/join.sh?key={body['key']}"
    assert body["command"] == f"curl -fsSL '{body['installUrl']}' | sh"
    assert body["windowsCommand"].startswith(f"irm '{SERVER}/api/dsh-computers/join.ps1?key=")
    bad = hub.call(hub.core.create_key("alice", {"os": "beos"}, SERVER))
    assert bad.status == 400


def test_used_and_expired_keys_are_pruned_an_hour_later() -> None:
    hub = Hub()
    used = hub.key()
    hub.enroll(used)
    expired = hub.key()
    hub.clock.advance(15 * 60 + 3600 + 1)
    hub.key()  # the next write prunes
    digests = {k.digest for k in hub.core.registry.keys.values()}
    assert hashlib.sha256(used.encode()).hexdigest() not in digests
    assert hashlib.sha256(expired.encode()).hexdigest() not in digests
    assert len(digests) == 1


def test_replace_keeps_the_id_and_kills_the_old_token_and_stream() -> None:
    hub = Hub()
    computer_id, old_token = hub.enrolled(name="desk")
    old_stream = hub.stream(old_token)
    answer = hub.enroll(hub.key(replace=True), name="desk")
    assert answer.body["computerId"] == computer_id
    assert hub.ended[old_stream]
    refused, _ = hub.core.open_stream(old_token)
    assert isinstance(refused, Answer) and refused.body["error"] == "invalid-token"
    assert isinstance(hub.core.open_stream(answer.body["token"])[0], Stream)
    # without replace, the same name makes a second computer
    other = hub.enroll(hub.key(), name="desk")
    assert other.body["computerId"] != computer_id


def test_a_label_names_the_joining_machine() -> None:
    hub = Hub()
    answer = hub.enroll(hub.key(label="Build box"), name="ip-10-0-0-1")
    assert answer.body["name"] == "Build box"


# --- presence and streams ------------------------------------------------------


def test_online_exactly_while_a_stream_is_open() -> None:
    hub = Hub()
    computer_id, token = hub.enrolled()
    assert not hub.online(computer_id)
    stream = hub.stream(token)
    assert hub.online(computer_id)
    hello = hub.last(stream, "hello")
    assert schema.problems(hello, schema.HELLO) == []
    assert hello["computerId"] == computer_id and hello["heartbeatMs"] == 20000
    assert hello["capabilities"] == ["exec", "fs"]
    hub.apply(hub.core.stream_closed(stream))
    assert not hub.online(computer_id)
    # a fresh heartbeat never makes a stream-less computer online
    answer = hub.call(hub.core.heartbeat(token, {"meta": {"agentVersion": "1.3.0"}}))
    assert answer.body == {"ok": True, "name": "mac-mini"}
    assert not hub.online(computer_id)


def test_a_second_stream_replaces_the_first() -> None:
    hub = Hub()
    computer_id, token = hub.enrolled()
    first = hub.stream(token)
    second = hub.stream(token)
    assert first in hub.ended and second not in hub.ended
    assert hub.core.streams[computer_id] is second
    # the replaced stream's own close does not take the computer offline
    hub.apply(hub.core.stream_closed(first))
    assert hub.online(computer_id)
    assert hub.core.counters.streams_replaced == 1


def test_pings_every_heartbeat_and_a_failed_ping_write_is_offline_at_once() -> None:
    hub = Hub()
    computer_id, token = hub.enrolled()
    stream = hub.stream(token)
    hub.tick(19.9)
    assert hub.names(stream) == ["hello"]
    hub.tick(0.1)
    assert hub.names(stream) == ["hello", "ping"]
    assert set(hub.last(stream, "ping")) == {"t"}
    hub.tick(20)
    assert hub.names(stream).count("ping") == 2
    # the driver's write of the next ping fails (a half-dead peer): it says so
    hub.apply(hub.core.stream_closed(stream))
    assert not hub.online(computer_id)
    hub.tick(40)
    assert hub.names(stream).count("ping") == 2  # no pings to a closed stream


def test_rename_pushes_config_and_delete_ends_the_stream() -> None:
    hub = Hub()
    computer_id, token = hub.enrolled()
    stream = hub.stream(token)
    answer = hub.call(hub.core.rename("alice", {"id": computer_id, "name": "  Desk Mac mini "}))
    assert answer.body == {"ok": True, "name": "Desk Mac mini"}
    assert hub.last(stream, "config") == {"name": "Desk Mac mini", "execEnabled": True}
    for bad in ("", "   ", "x" * 65, "a\nb"):
        assert hub.call(hub.core.rename("alice", {"id": computer_id, "name": bad})).status == 400
    assert hub.call(hub.core.rename("bob", {"id": computer_id, "name": "mine"})).status == 404
    assert hub.call(hub.core.delete("bob", {"id": computer_id})).status == 404
    assert hub.call(hub.core.delete("alice", {"id": computer_id})).body == {"ok": True}
    assert hub.ended[stream] == "the computer was deleted"
    assert computer_id not in hub.core.registry.computers
    refused, _ = hub.core.open_stream(token)
    assert isinstance(refused, Answer) and refused.status == 401
    assert hub.call(hub.core.delete("alice", {"id": computer_id})).body["error"] == "not-found"


def test_users_see_only_their_own_computers() -> None:
    hub = Hub()
    hub.enrolled("alice", "a-box")
    hub.stream(hub.enrolled("alice", "a-box2")[1])
    hub.enrolled("bob", "b-box")
    names = [c["name"] for c in hub.core.state("alice", SERVER)["computers"]]
    assert names == ["a-box2"]  # a-box never opened a stream (§11.6.4)
    assert hub.core.computer_list("bob")["computers"] == []
    assert hub.core.health()["computers"] == 3


def test_state_matches_the_spec_shape() -> None:
    hub = Hub()
    _computer_id, token = hub.enrolled()
    hub.stream(token)
    state = hub.core.state("alice", SERVER)
    assert schema.problems(state, schema.STATE) == []
    row = state["computers"][0]
    assert row["online"] and row["bots"] == {"used": 1, "total": 1}
    assert not row["drift"] and not row["updateRequired"]
    assert schema.problems(hub.core.health(), schema.HEALTH) == []


def test_key_status_through_its_life() -> None:
    hub = Hub()
    key = hub.key()
    status = hub.core.key_status
    assert status("alice", key).body == {"status": "waiting", "computer": None}
    assert status("bob", key).body["status"] == "unknown"
    assert status("alice", "dshc_nope").body["status"] == "unknown"
    answer = hub.enroll(key)
    assert status("alice", key).body["status"] == "waiting"  # enrolled, not yet streaming
    stream = hub.stream(answer.body["token"])
    connected = status("alice", key).body
    assert connected["status"] == "connected"
    assert connected["computer"] == {
        "id": answer.body["computerId"],
        "name": "mac-mini",
        "online": True,
    }
    assert schema.problems(connected, schema.KEY_STATUS) == []
    hub.apply(hub.core.stream_closed(stream))
    assert status("alice", key).body["status"] == "used"
    stale = hub.key()
    hub.clock.advance(15 * 60)
    assert status("alice", stale).body["status"] == "expired"
    superseded = hub.key()
    hub.key()
    assert status("alice", superseded).body["status"] == "used"


# --- exec dispatch and results -------------------------------------------------


def _exec(hub: Hub, user: str = "alice", computer: str = "mac-mini", **kw) -> CoreExecution:
    outcome, actions = hub.core.start_exec(user, computer, kw.pop("command", "echo hi"), **kw)
    hub.apply(actions)
    assert not isinstance(outcome, ToolError), outcome
    return outcome


def test_exec_goes_over_the_stream_and_the_result_settles_it() -> None:
    hub = Hub()
    _, token = hub.enrolled()
    stream = hub.stream(token)
    execution = _exec(hub, cwd="/tmp", timeout_ms=5000)
    event = hub.last(stream, "exec")
    assert schema.problems(event, schema.EXEC) == []
    assert event["command"] == "echo hi" and event["cwd"] == "/tmp" and event["stream"] is True
    result = {
        "requestId": execution.request_id,
        "ok": True,
        "exitCode": 0,
        "signal": None,
        "stdout": "hi\n",
        "stderr": "",
        "durationMs": 3,
        "truncated": False,
        "timedOut": False,
        "error": None,
    }
    assert hub.call(hub.core.result(token, result)).body == {"ok": True}
    value = hub.settled[execution.request_id].value
    assert value["stdout"] == "hi\n" and value["exitCode"] == 0
    assert value["computer"]["name"] == "mac-mini"
    late = hub.call(hub.core.result(token, result))
    assert (late.status, late.body["error"]) == (404, "unknown-request")


def test_a_result_from_another_computer_is_an_unknown_request() -> None:
    hub = Hub()
    _, token = hub.enrolled(name="one")
    _, other = hub.enrolled(name="two")
    hub.stream(token)
    hub.stream(other)
    execution = _exec(hub, computer="one")
    body = {"requestId": execution.request_id, "ok": True, "exitCode": 0}
    assert hub.call(hub.core.result(other, body)).status == 404
    assert hub.call(hub.core.result("dshc_" + "x" * 43, body)).status == 401


def test_chunks_reassemble_in_seq_order_dropping_duplicates() -> None:
    hub = Hub()
    _, token = hub.enrolled()
    hub.stream(token)
    rid = _exec(hub).request_id

    def chunk(seq: int, out: bytes) -> int:
        body = {"requestId": rid, "seq": seq, "stdout": b64(out), "stderr": ""}
        return hub.call(hub.core.chunk(token, body)).status

    assert chunk(1, b"b") == 200  # ahead of a gap: held
    assert hub.outputs.get(rid) is None
    assert chunk(0, b"a") == 200
    assert chunk(0, b"a") == 200  # a retried POST
    assert chunk(3, b"d") == 200
    assert chunk(2, b"c") == 200
    assert chunk(1, b"b") == 200
    assert b"".join(d for _, d in hub.outputs[rid]) == b"abcd"
    assert hub.core.counters.chunks_duplicate == 2
    typed = {"requestId": rid, "seq": 4, "type": "stderr", "data": b64(b"E")}
    assert hub.call(hub.core.chunk(token, typed)).status == 200
    beat = {"requestId": rid, "seq": 5, "type": "heartbeat", "data": ""}
    assert hub.call(hub.core.chunk(token, beat)).status == 200
    assert hub.outputs[rid][-1] == ("stderr", b"E")
    bad = hub.call(hub.core.chunk(token, {"requestId": rid, "seq": 6, "stdout": "%%%"}))
    assert bad.status == 400
    unknown = hub.call(hub.core.chunk(token, {"requestId": "req_x", "seq": 0}))
    assert unknown.status == 404


def test_timeout_without_promotion_cancels_and_fails() -> None:
    hub = Hub(promote_on_timeout=False)
    _, token = hub.enrolled()
    stream = hub.stream(token)
    execution = _exec(hub, timeout_ms=2000)
    assert hub.last(stream, "exec")["timeoutMs"] == 2000
    hub.tick(2 + 4.9)  # the agent's own timed-out result still has time
    assert execution.request_id not in hub.settled
    hub.tick(0.2)
    error = hub.settled[execution.request_id].error
    assert error is not None and error.code == "timeout"
    assert hub.last(stream, "cancel") == {"requestId": execution.request_id}


def test_timeout_promotes_to_a_background_job() -> None:
    hub = Hub()
    _, token = hub.enrolled()
    stream = hub.stream(token)
    execution = _exec(hub, timeout_ms=1000)
    assert hub.last(stream, "exec")["timeoutMs"] == 3_600_000  # the agent may keep it running
    early = {"requestId": execution.request_id, "seq": 0, "stdout": b64(b"early\n")}
    hub.call(hub.core.chunk(token, early))
    hub.tick(1.0)
    promoted = hub.settled[execution.request_id].value
    assert promoted["promoted"] is True
    job_id = promoted["jobId"]
    chunk = {"requestId": execution.request_id, "seq": 1, "stdout": b64(b"later\n")}
    hub.call(hub.core.chunk(token, chunk))
    assert len(hub.outputs[execution.request_id]) == 1  # nobody watches any more
    view = hub.core.job_view("alice", job_id)
    assert view["running"] and view["output"] == "early\nlater\n"
    assert isinstance(hub.core.job_view("bob", job_id), ToolError)
    result = {"requestId": execution.request_id, "ok": True, "exitCode": 0, "stdout": "later\n"}
    hub.call(hub.core.result(token, result))
    done = hub.core.job_view("alice", job_id, since=8)
    assert not done["running"] and done["exitCode"] == 0 and done["output"] == "ter\n"


def test_cancel_sends_cancel_and_settles_aborted() -> None:
    hub = Hub()
    _, token = hub.enrolled()
    stream = hub.stream(token)
    execution = _exec(hub)
    assert hub.apply(hub.core.cancel_exec("bob", execution.request_id)) == []
    hub.apply(hub.core.cancel_exec("alice", execution.request_id))
    assert hub.last(stream, "cancel") == {"requestId": execution.request_id}
    assert hub.settled[execution.request_id].error.code == "aborted"


def test_a_command_survives_a_stream_that_comes_back_within_a_heartbeat() -> None:
    hub = Hub()
    _, token = hub.enrolled()
    first = hub.stream(token)
    kept = _exec(hub, timeout_ms=100_000)
    hub.apply(hub.core.stream_closed(first))
    hub.tick(10)
    hub.stream(token)
    hub.tick(30)
    assert kept.request_id not in hub.settled
    lost = _exec(hub, timeout_ms=100_000)
    hub.apply(hub.core.stream_closed(hub.core.streams[kept.computer_id]))
    hub.tick(20)
    assert hub.settled[lost.request_id].error.code == "computer-went-offline"
    assert hub.settled[kept.request_id].error.code == "computer-went-offline"


def test_exec_refusals_the_model_can_act_on() -> None:
    hub = Hub()
    computer_id, token = hub.enrolled()
    outcome, _ = hub.core.start_exec("alice", "mac-mini", "true")
    assert isinstance(outcome, ToolError) and outcome.code == "unknown-computer"
    hub.stream(token)
    hub.apply(hub.core.stream_closed(hub.core.streams[computer_id]))
    outcome, _ = hub.core.start_exec("alice", "mac-mini", "true")
    assert outcome.code == "computer-offline"
    assert "offline; run computer_list" in outcome.message
    disabled = Hub(exec_enabled=False)
    outcome, _ = disabled.core.start_exec("alice", "x", "true")
    assert outcome.code == "exec-disabled"


def test_computer_resolution_rules() -> None:
    hub = Hub()
    ids = {}
    for name in ("Desk Mac", "desk-linux", "Laptop"):
        ids[name], token = hub.enrolled(name=name)
        hub.stream(token)
    pick = hub.core.pick
    assert pick("alice", ids["Laptop"], "exec").name == "Laptop"
    assert pick("alice", "desk mac", "exec").name == "Desk Mac"
    assert pick("alice", "lap", "exec").name == "Laptop"
    ambiguous = pick("alice", "desk", "exec")
    assert isinstance(ambiguous, ToolError) and ambiguous.code == "ambiguous-computer"
    assert {c["name"] for c in ambiguous.details["candidates"]} == {"Desk Mac", "desk-linux"}
    assert pick("alice", "nothing", "exec").code == "unknown-computer"
    assert pick("alice", None, "fs").code == "unknown-computer"  # three candidates


def test_file_tools_are_offered_only_with_an_fs_computer() -> None:
    hub = Hub()
    v1 = hub.enroll(hub.key(), name="old")
    body = {"key": hub.key(), "agentVersion": "1.0.0", "machine": {"hostname": "v1"}}
    hub.call(hub.core.enroll(body, SERVER))
    hub.stream(v1.body["token"])
    # v1's enrollment reported capabilities; make the only visible one a v1 agent
    computer = hub.core.registry.computers[v1.body["computerId"]]
    computer.capabilities = None
    assert "computer_read" not in hub.core.tool_names("alice")
    refused = hub.core.pick("alice", "old", "fs")
    assert refused.code == "capability-missing" and "upgrade the agent" in refused.message
    computer.capabilities = ("exec", "fs")
    assert "computer_read" in hub.core.tool_names("alice")


def test_fs_requests_go_over_the_stream_and_time_out() -> None:
    hub = Hub()
    _, token = hub.enrolled()
    stream = hub.stream(token)
    pending, _computer, actions = hub.core.start_fs(
        "alice", None, {"op": "stat", "path": "/etc/hostname"}
    )
    hub.apply(actions)
    event = hub.last(stream, "fs")
    assert schema.problems(event, schema.FS_REQUEST) == []
    assert event["requestId"].startswith("fsr_")
    result = {
        "requestId": event["requestId"],
        "ok": True,
        "op": "stat",
        "path": "/x",
        "error": None,
    }
    assert hub.call(hub.core.fs_result(token, result)).status == 200
    assert hub.settled[pending.request_id].value["ok"] is True
    slow, _, actions = hub.core.start_fs("alice", "mac-mini", {"op": "stat", "path": "/"})
    hub.apply(actions)
    hub.tick(20.1)
    assert hub.settled[slow.request_id].error.code == "timeout"


def test_the_registry_survives_a_restart_through_the_store() -> None:
    from tetherbed.hub.dsh import persistence
    from tetherbed.hub.dsh.actions import Persist
    from tetherbed.hub.dsh.core import DshHubCore
    from tetherbed.hub.store import HubStore

    hub = Hub()
    computer_id, token = hub.enrolled()
    hub.stream(token)
    pending = hub.key()
    store = HubStore(":memory:")
    for batch in hub.persisted:
        persistence.write(store, batch.changes)
    computers, keys = persistence.load(store)
    restarted = DshHubCore(hub.core.config, hub.clock, computers=computers, keys=keys)
    assert restarted.registry.authenticate(token).id == computer_id
    assert restarted.state("alice", SERVER)["pendingKey"] is None  # the key was never stored
    assert restarted.registry.key_refusal(pending, hub.clock.time()) is None
    rows, key_rows = store.dsh_rows()
    assert all(token not in row[3] and pending not in row[3] for row in rows)
    assert all(pending not in row[2] for row in key_rows)
    assert isinstance(hub.persisted[0], Persist)


# --- planted defects ---------------------------------------------------------


def test_defect_reusable_key() -> None:
    hub = Hub(defects=frozenset({"reusable_key"}))
    key = hub.key()
    assert hub.enroll(key).status == 200
    assert hub.enroll(key, name="second").status == 200


def test_defect_token_in_clear() -> None:
    hub = Hub(defects=frozenset({"token_in_clear"}))
    computer_id, token = hub.enrolled()
    assert hub.core.registry.computers[computer_id].token_hash == token
    assert isinstance(hub.core.open_stream(token)[0], Stream)


def test_defect_presence_from_heartbeat() -> None:
    hub = Hub(defects=frozenset({"presence_from_heartbeat"}))
    computer_id, token = hub.enrolled()
    hub.stream(token)
    hub.apply(hub.core.stream_closed(hub.core.streams[computer_id]))
    hub.call(hub.core.heartbeat(token, {"meta": {}}))
    assert hub.online(computer_id)  # wrong, on purpose


def test_defect_chunks_out_of_order() -> None:
    hub = Hub(defects=frozenset({"chunks_out_of_order"}))
    _, token = hub.enrolled()
    hub.stream(token)
    rid = _exec(hub).request_id
    for seq, data in ((1, b"b"), (0, b"a"), (0, b"a")):
        hub.call(hub.core.chunk(token, {"requestId": rid, "seq": seq, "stdout": b64(data)}))
    assert b"".join(d for _, d in hub.outputs[rid]) == b"baa"


def test_unknown_defects_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown dsh hub defects"):
        Hub(defects=frozenset({"nope"}))
