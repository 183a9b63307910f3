"""End to end: a real hub and agent process, driven through the Python client."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import time
from pathlib import Path

import msgspec
import pytest

from tetherbed.client.sandbox import (
    AuthenticationError,
    CommandExitException,
    HubError,
    HubSandbox,
    NotFoundError,
)
from tetherbed.launch import start_agent
from tetherbed.runtime.websocket_transport import connect_websocket

from .conftest import Stack

pytestmark = pytest.mark.e2e


async def test_file_tour(stack: Stack) -> None:
    async with HubSandbox.connect(stack.hub.url, stack.session_id, stack.client_token) as sb:
        await sb.files.write("tour/a.txt", "line one\r\nline two\n")
        blob = os.urandom(100_000)
        await sb.files.write("tour/blob.bin", blob)
        assert (stack.root / "tour" / "a.txt").read_bytes() == b"line one\r\nline two\n"
        assert await sb.files.read("tour/a.txt") == "line one\r\nline two\n"
        assert await sb.files.read("tour/blob.bin", format="bytes") == blob
        names = sorted(e.name for e in await sb.files.list("tour"))
        assert names == ["a.txt", "blob.bin"]
        info = await sb.files.get_info("tour/blob.bin")
        assert info.size == 100_000
        await sb.files.rename("tour/a.txt", "tour/b.txt")
        assert not await sb.files.exists("tour/a.txt")
        assert await sb.files.exists("tour/b.txt")
        await sb.files.remove("tour")
        assert not (stack.root / "tour").exists()


async def test_jail_violations_are_typed_and_distinct_from_missing(stack: Stack) -> None:
    async with HubSandbox.connect(stack.hub.url, stack.session_id, stack.client_token) as sb:
        with pytest.raises(HubError) as outside:
            await sb.files.read("/etc/hostname")
        assert outside.value.code == "PATH_OUTSIDE_ALLOWED_ROOT"
        with pytest.raises(NotFoundError) as missing:
            await sb.files.read("no-such-file")
        assert missing.value.code == "PATH_NOT_FOUND"
        (stack.root / "escape").symlink_to("/etc")
        with pytest.raises(HubError) as link:
            await sb.files.read("escape/hostname")
        assert link.value.code == "PATH_OUTSIDE_ALLOWED_ROOT"


async def test_commands_run_in_the_root_without_leaking_the_environment(stack: Stack) -> None:
    async with HubSandbox.connect(stack.hub.url, stack.session_id, stack.client_token) as sb:
        result = await sb.commands.run("pwd; env", envs={"GREETING": "hi"})
        lines = result.stdout.splitlines()
        assert Path(lines[0]).resolve() == stack.root.resolve()
        assert "GREETING=hi" in lines
        assert not any("PYTEST" in line or "TOKEN" in line for line in lines)
        with pytest.raises(CommandExitException) as failed:
            await sb.commands.run("echo oops >&2; exit 7")
        assert failed.value.exit_code == 7
        assert "oops" in failed.value.stderr


async def test_pipelined_requests_all_answer_under_their_own_ids(stack: Stack) -> None:
    async with HubSandbox.connect(stack.hub.url, stack.session_id, stack.client_token) as sb:
        for i in range(20):
            (stack.root / f"p{i}.txt").write_text(f"content {i}")
        reads = [sb.files.read(f"p{i % 20}.txt") for i in range(200)]
        results = await asyncio.gather(*reads)
        assert results == [f"content {i % 20}" for i in range(200)]


async def test_two_clients_with_the_same_ids_never_cross(stack: Stack) -> None:
    for name in ("x", "y"):
        (stack.root / f"{name}.txt").write_text(name * 10)
    counter = iter(range(10**6))

    def same_ids() -> str:
        return f"id-{next(counter) % 50}"

    async def hammer(name: str) -> list[str]:
        ids = iter(range(10**6))
        async with HubSandbox.connect(
            stack.hub.url,
            stack.session_id,
            stack.client_token,
            id_factory=lambda: f"shared-{next(ids)}",
        ) as sb:
            return await asyncio.gather(*(sb.files.read(f"{name}.txt") for _ in range(100)))

    xs, ys = await asyncio.gather(hammer("x"), hammer("y"))
    assert set(xs) == {"x" * 10} and set(ys) == {"y" * 10}


async def test_raw_envelopes_malformed_and_unknown_types(stack: Stack) -> None:
    url = f"{stack.hub.url}/v1/sessions/{stack.session_id}/client"
    transport = await connect_websocket(url, {"Authorization": f"Bearer {stack.client_token}"})
    try:
        await transport.send(b"{broken")
        await transport.send(b'{"type":"TELEPORT","id":"t1","payload":{}}')
        await transport.send(b'{"type":"FILE_READ","id":"t2","payload":{"path":5}}')
        await transport.send(b'{"type":"FILE_STAT","id":"t3","payload":{"path":".","zzz":1}}')
        answers = [msgspec.json.decode(await transport.recv()) for _ in range(4)]
    finally:
        await transport.close()
    by_id = {a["id"]: a for a in answers}
    assert by_id[None]["payload"]["code"] == "INVALID_MESSAGE"
    assert by_id["t1"]["payload"]["code"] == "UNKNOWN_MESSAGE_TYPE"
    # The agent's answer, relayed: a spec code, the precise one in details.
    assert by_id["t2"]["payload"]["code"] == "INTERNAL_ERROR"
    assert by_id["t2"]["payload"]["details"]["reason_code"] == "INVALID_MESSAGE"
    assert "$.path" in by_id["t2"]["payload"]["message"]
    assert by_id["t3"]["type"] == "FILE_STAT_RESPONSE"  # unknown field ignored


async def test_tokens_and_users_are_enforced(stack: Stack) -> None:
    with pytest.raises(AuthenticationError):
        await HubSandbox.connect(stack.hub.url, stack.session_id, "tb_c_wrong")
    with pytest.raises(AuthenticationError):  # an agent token is not a client token
        await HubSandbox.connect(stack.hub.url, stack.session_id, stack.agent_token)
    mallory = stack.hub.token("mallory", "client")
    with pytest.raises(NotFoundError) as refused:
        await HubSandbox.connect(stack.hub.url, stack.session_id, mallory)
    assert refused.value.code == "SESSION_NOT_FOUND"


def test_agent_with_a_bad_token_exits_with_auth_refused(stack: Stack, tmp_path: Path) -> None:
    agent = start_agent(stack.hub.url, "tb_a_nope", tmp_path, "other")
    assert agent.wait(20) == 4
    assert "refused the token" in agent.log()


def test_hub_token_create_prints_only_the_token(stack: Stack) -> None:
    token = stack.hub.token("carol", "client")
    assert token.startswith("tb_c_") and "\n" not in token and len(token) > 40
    with sqlite3.connect(stack.hub.state_dir / "hub.sqlite3") as db:
        stored = [row[0] for row in db.execute("SELECT sha256 FROM tokens")]
        dumped = "\n".join(db.iterdump())
    assert hashlib.sha256(token.encode()).hexdigest() in stored
    assert token not in dumped


async def test_shell_not_enabled_means_capability_not_granted(stack: Stack, tmp_path: Path) -> None:
    agent = start_agent(stack.hub.url, stack.agent_token, tmp_path, "no-shell", machine_id="m-ns")
    try:
        stack.hub.wait_connected(stack.client_token, "no-shell")
        async with HubSandbox.connect(stack.hub.url, "no-shell", stack.client_token) as sb:
            with pytest.raises(HubError) as refused:
                await sb.commands.run("true")
            assert refused.value.code == "CAPABILITY_NOT_GRANTED"
    finally:
        agent.stop()


async def test_capacity_is_respected_and_excess_waits_at_the_hub(
    stack: Stack, tmp_path: Path
) -> None:
    agent = start_agent(
        stack.hub.url,
        stack.agent_token,
        tmp_path,
        "narrow",
        machine_id="m-narrow",
        enable_shell=True,
        args=["--max-concurrent", "2"],
    )
    try:
        stack.hub.wait_connected(stack.client_token, "narrow")
        async with HubSandbox.connect(stack.hub.url, "narrow", stack.client_token) as sb:
            started = time.monotonic()
            runs = [sb.commands.run("sleep 0.3; echo done") for _ in range(6)]
            results = await asyncio.gather(*runs)
            elapsed = time.monotonic() - started
        assert [r.stdout for r in results] == ["done\n"] * 6  # none was SHIM_OVERLOADED
        assert elapsed >= 0.85  # three waves of two: the hub never exceeded the agent's slots
    finally:
        agent.stop()


async def test_agent_loss_reports_outcome_unknown_then_gives_up_after_the_window(
    stack: Stack, tmp_path: Path
) -> None:
    agent = start_agent(
        stack.hub.url, stack.agent_token, tmp_path, "doomed", machine_id="m-d", enable_shell=True
    )
    try:
        stack.hub.wait_connected(stack.client_token, "doomed")
        async with HubSandbox.connect(stack.hub.url, "doomed", stack.client_token) as sb:
            pending = asyncio.ensure_future(sb.commands.run("sleep 30"))
            await asyncio.sleep(0.5)
            agent.signal(9)
            started = time.monotonic()
            with pytest.raises(HubError) as lost:
                await asyncio.wait_for(pending, 10)
            assert time.monotonic() - started < 5  # at once, not after the retry window
            assert lost.value.code == "OUTCOME_UNKNOWN"
            # the session stays reserved for its machine for the retry window
            # (3 s here): a read is held, then refused as never sent
            started = time.monotonic()
            with pytest.raises(HubError) as gone:
                await sb.files.read("x")
            assert gone.value.code == "AGENT_NOT_CONNECTED"
            assert 1.0 <= time.monotonic() - started < 10
    finally:
        agent.stop()
