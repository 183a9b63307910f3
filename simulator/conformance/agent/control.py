"""The control connection: browse with references and cursors, attach with root
grants, activate / restore / detach, the eight-child cap, references dying on
reconnect.

Section: Machine control and per-chat roots. These cases need the agent's
control-mode command (Tetherbed's own has one; another agent's is given with
--control-command); its `{root}` is the folder browsing starts from.
"""

from __future__ import annotations

import re
import time
from typing import Any

from tetherbed.simulator.conformance.agent.answers import quote, require_error, require_type
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AckPolicy, AgentConnection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case

SECTION = "Machine control and per-chat roots"
BROWSE = f"{SECTION} › DIRECTORY_LIST_REQUEST / DIRECTORY_LIST_RESPONSE"
ATTACH = f"{SECTION} › ATTACH_SESSION / SESSION_ATTACHED"
LIFECYCLE = f"{SECTION} › Activation, restoration, and detachment"
INVALID = "DIRECTORY_REFERENCE_INVALID"
FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")
GRANT = re.compile(r"^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
#: A child's data connection may take this long to appear after activation.
CHILD_WAIT = 20.0


async def control(ctx: AgentContext, policy: AckPolicy | None = None) -> AgentConnection:
    return await ctx.connect(policy, control=True)


async def browse(
    conn: AgentConnection, browse_id: Any = None, ref: Any = None, **extra: Any
) -> Any:
    return await conn.request(
        "DIRECTORY_LIST_REQUEST", {"browse_id": browse_id, "directory_ref": ref, **extra}
    )


async def browse_root(ctx: AgentContext, conn: AgentConnection) -> tuple[str, str, dict]:
    """Start a browse and open the entry of the case's root: (browse_id, root ref, listing)."""
    start = require_type(await browse(conn), "DIRECTORY_LIST_RESPONSE", "starting a browse")
    browse_id = start.get("browse_id")
    entry = next((e for e in start.get("entries") or [] if e.get("path") == str(ctx.root)), None)
    if entry is None:
        paths = [e.get("path") for e in start.get("entries") or []]
        ctx.depart(f"the browse roots {paths} do not include the browse root {ctx.root}")
    listing = require_type(
        await browse(conn, browse_id, entry["directory_ref"]),
        "DIRECTORY_LIST_RESPONSE",
        "listing the browse root",
    )
    return str(browse_id), str(entry["directory_ref"]), listing


def ref_of(ctx: AgentContext, listing: dict, name: str) -> str:
    for entry in listing.get("entries") or []:
        if entry.get("name") == name:
            return str(entry["directory_ref"])
    ctx.depart(f"{name} is not listed: {[e.get('name') for e in listing.get('entries') or []]}")


async def attach(
    ctx: AgentContext, conn: AgentConnection, name: str, session: str
) -> dict[str, Any]:
    browse_id, _, listing = await browse_root(ctx, conn)
    answer = await conn.request(
        "ATTACH_SESSION",
        {"session_id": session, "browse_id": browse_id,
         "directory_ref": ref_of(ctx, listing, name), "expected_connection_id": None},
    )  # fmt: skip
    return require_type(answer, "SESSION_ATTACHED", f"attaching {name}")


async def activate(conn: AgentConnection, session: str, revision: Any) -> Any:
    return await conn.request(
        "ACTIVATE_SESSION", {"session_id": session, "revision": revision}, timeout=30
    )


@case(
    "LE-control-hello",
    level=Level.MUST,
    section=f"{SECTION}; Transport (Control endpoint)",
    rule="The control connection dials /ws/local-executor and its HELLO advertises "
    "directory_browse with allowed_root null.",
    needs={"control"},
)
async def control_hello(ctx: AgentContext) -> None:
    conn = await control(ctx)
    ctx.require(conn.control, f"the control daemon dialled {conn.path}")
    ctx.require("directory_browse" in conn.advertised, f"capabilities {conn.advertised}")
    root = conn.hello_payload.get("allowed_root", "absent")
    ctx.require(root is None, f"allowed_root is {root!r} on the control connection")


@case(
    "LE-control-ack-checked",
    level=Level.MUST,
    section="Message Types › HELLO_ACK (control connection)",
    rule="A control daemon fails terminally when the control HELLO_ACK lacks its "
    "connection_id: it closes and does not reconnect.",
    needs={"control"},
    timeout=40,
)
async def ack_checked(ctx: AgentContext) -> None:
    conn = await control(ctx, AckPolicy(drop=("connection_id",)))
    ended = await conn.socket.wait_closed(5)
    ctx.require(ended is not None, "the daemon carried on after an ACK without connection_id")
    again = await ctx.attempts_within(ended.t, 8.0, ctx.processes[-1])
    if again:
        ctx.depart(f"the daemon dialled again {again[0].t - ended.t:.1f} s later")


@case(
    "LE-control-rejects-data-requests",
    level=Level.MUST,
    section=SECTION,
    rule="The control connection rejects FILE_*, shell, computer-use and local-LLM messages.",
    needs={"control"},
)
async def rejects_data(ctx: AgentContext) -> None:
    conn = await control(ctx)
    (ctx.root / "f.txt").write_text("x")
    for kind, payload in (
        ("FILE_READ", {"path": str(ctx.root / "f.txt"), "encoding": "utf-8", "format": "text",
                       "offset": 0, "length": None}),
        ("EXECUTE_COMMAND", {"argv": ["true"], "timeout_seconds": 5}),
        ("SCREENSHOT_REQUEST", {"monitor": 0, "format": "png"}),
    ):  # fmt: skip
        require_error(await conn.request(kind, payload), (), f"{kind} on the control connection")


@case(
    "LE-control-browse-start",
    level=Level.MUST,
    section=BROWSE,
    rule="Both references null start a five-minute browse: browse_id, the virtual roots as "
    "entries {directory_ref, name, path}, expires_at five minutes ahead.",
    needs={"control"},
)
async def browse_start(ctx: AgentContext) -> None:
    conn = await control(ctx)
    started = time.time()
    got = require_type(await browse(conn), "DIRECTORY_LIST_RESPONSE", "starting a browse")
    ctx.require(isinstance(got.get("browse_id"), str) and got["browse_id"], "no browse_id")
    entries = got.get("entries") or []
    ctx.require(any(e.get("path") == str(ctx.root) for e in entries), "the root is not offered")
    expires = got.get("expires_at")
    ctx.require(isinstance(expires, int | float), f"expires_at is {expires!r}")
    ctx.require(
        abs(expires - (started + 300)) < 30, f"expires_at is {expires - started:.0f} s ahead"
    )


@case(
    "LE-control-browse-directories-only",
    level=Level.MUST,
    section=BROWSE,
    rule="Listings hold only real directories (files and symlinks are skipped), each with "
    "only its name, canonical path and reference.",
    needs={"control"},
)
async def directories_only(ctx: AgentContext) -> None:
    for name in ("alpha", "beta"):
        (ctx.root / name).mkdir()
    (ctx.root / "file.txt").write_text("x")
    (ctx.root / "link-dir").symlink_to(ctx.root / "alpha", target_is_directory=True)
    conn = await control(ctx)
    _, _, listing = await browse_root(ctx, conn)
    names = sorted(e.get("name") for e in listing.get("entries") or [])
    ctx.require(names == ["alpha", "beta"], f"listed {names}")
    extra = sorted({k for e in listing["entries"] for k in e} - {"directory_ref", "name", "path"})
    ctx.require(not extra, f"entries carry {extra}")
    paths = {e["name"]: e["path"] for e in listing["entries"]}
    ctx.require(
        paths.get("alpha") == str(ctx.root / "alpha"), f"alpha's path is {paths.get('alpha')!r}"
    )


@case(
    "LE-control-browse-cursor",
    level=Level.MUST,
    section=BROWSE,
    rule="A page holds at most 200 directories; next_cursor, sent with the same browse and "
    "directory references, fetches the next page.",
    needs={"control"},
)
async def cursor(ctx: AgentContext) -> None:
    for number in range(250):
        (ctx.root / f"d{number:03}").mkdir()
    conn = await control(ctx)
    browse_id, ref, first = await browse_root(ctx, conn)
    entries = first.get("entries") or []
    ctx.require(len(entries) <= 200, f"a page of {len(entries)} directories")
    token = first.get("next_cursor")
    ctx.require(isinstance(token, str) and token, "no next_cursor with 250 directories")
    second = require_type(
        await browse(conn, browse_id, ref, cursor=token), "DIRECTORY_LIST_RESPONSE", "page two"
    )
    names = {e.get("name") for e in entries} | {e.get("name") for e in second.get("entries") or []}
    ctx.require(len(names) == 250, f"two pages hold {len(names)} distinct directories")


@case(
    "LE-control-browse-invalid-reference",
    level=Level.MUST,
    section=f"{BROWSE}; Error › DIRECTORY_REFERENCE_INVALID",
    rule="A malformed or unknown browse/reference pair, or only one of the two, is "
    "DIRECTORY_REFERENCE_INVALID.",
    needs={"control"},
)
async def invalid_reference(ctx: AgentContext) -> None:
    conn = await control(ctx)
    require_error(await browse(conn, "bogus", "bogus"), INVALID, "an unknown pair")
    start = require_type(await browse(conn), "DIRECTORY_LIST_RESPONSE", "a browse")
    require_error(await browse(conn, start.get("browse_id"), None), INVALID, "only a browse_id")


@case(
    "LE-control-refs-die-on-reconnect",
    level=Level.MUST,
    section=SECTION,
    rule="All browse references are invalidated whenever the control WebSocket reconnects.",
    needs={"control"},
    timeout=40,
)
async def refs_die(ctx: AgentContext) -> None:
    conn = await control(ctx)
    browse_id, ref, _ = await browse_root(ctx, conn)
    await conn.close(1011, "server restart")
    again = await ctx.platform.next_connection(15, after=1)
    if again is None:
        ctx.no_evidence("the control daemon did not reconnect within 15 s")
    answer = await browse(again, browse_id, ref)
    require_error(answer, INVALID, "a reference from before the reconnect")


@case(
    "LE-control-attach",
    level=Level.MUST,
    section=ATTACH,
    rule="ATTACH_SESSION answers SESSION_ATTACHED with the session, the canonical root, a "
    "64-hex fingerprint, a revision and a v1 root grant; the browse is consumed.",
    needs={"control"},
)
async def attach_case(ctx: AgentContext) -> None:
    (ctx.root / "project").mkdir()
    conn = await control(ctx)
    browse_id, _, listing = await browse_root(ctx, conn)
    ref = ref_of(ctx, listing, "project")
    payload = {"session_id": "chat-1", "browse_id": browse_id, "directory_ref": ref,
               "expected_connection_id": None}  # fmt: skip
    got = require_type(await conn.request("ATTACH_SESSION", payload), "SESSION_ATTACHED", "attach")
    problems = []
    if got.get("session_id") != "chat-1":
        problems.append(f"session_id {got.get('session_id')!r}")
    if got.get("allowed_root") != str(ctx.root / "project"):
        problems.append(f"allowed_root {got.get('allowed_root')!r}")
    if not FINGERPRINT.match(str(got.get("fingerprint"))):
        problems.append(f"fingerprint {got.get('fingerprint')!r}")
    if not isinstance(got.get("revision"), int):
        problems.append(f"revision {got.get('revision')!r}")
    if not GRANT.match(str(got.get("root_grant"))):
        problems.append("root_grant is not v1.<claims>.<hmac>")
    ctx.require(not problems, "SESSION_ATTACHED: " + "; ".join(problems))
    again = dict(payload, session_id="chat-2")
    require_error(await conn.request("ATTACH_SESSION", again), INVALID, "reusing the browse")


async def _child(ctx: AgentContext, session: str, known: int) -> AgentConnection:
    deadline = time.monotonic() + CHILD_WAIT
    while time.monotonic() < deadline:
        for connection in ctx.platform.connections[known:]:
            if connection.session == session and connection.handshake_done:
                return connection
        await ctx.platform.next_connection(0.5, after=len(ctx.platform.connections))
    ctx.depart(f"no data connection for {session} within {CHILD_WAIT:g} s of its activation")


@case(
    "LE-control-activate",
    level=Level.MUST,
    section=LIFECYCLE,
    rule="ACTIVATE_SESSION answers SESSION_ACTIVATED (session, root, fingerprint, revision) "
    "and starts a child whose data connection serves that session in the attached root.",
    needs={"control"},
)
async def activate_case(ctx: AgentContext) -> None:
    (ctx.root / "project").mkdir()
    conn = await control(ctx)
    attached = await attach(ctx, conn, "project", "chat-1")
    known = len(ctx.platform.connections)
    got = require_type(
        await activate(conn, "chat-1", attached["revision"]), "SESSION_ACTIVATED", "activate"
    )
    for name in ("session_id", "allowed_root", "fingerprint", "revision"):
        ctx.require(got.get(name) == attached.get(name), f"{name} {got.get(name)!r} differs")
    child = await _child(ctx, "chat-1", known)
    root = child.hello_payload.get("allowed_root")
    ctx.require(root == str(ctx.root / "project"), f"the child serves {root!r}")


@case(
    "LE-control-activate-unattached",
    level=Level.MUST,
    section=f"{LIFECYCLE}; Error › SESSION_NOT_ATTACHED",
    rule="Activating a session before a folder was attached is SESSION_NOT_ATTACHED.",
    needs={"control"},
)
async def activate_unattached(ctx: AgentContext) -> None:
    conn = await control(ctx)
    require_error(await activate(conn, "never-attached", 1), "SESSION_NOT_ATTACHED", "activate")


@case(
    "LE-control-revision-mismatch",
    level=Level.MUST,
    section=f"{LIFECYCLE}; Error › SESSION_REVISION_MISMATCH",
    rule="Activation with a stale or conflicting revision is SESSION_REVISION_MISMATCH.",
    needs={"control"},
)
async def revision_mismatch(ctx: AgentContext) -> None:
    (ctx.root / "project").mkdir()
    conn = await control(ctx)
    attached = await attach(ctx, conn, "project", "chat-1")
    answer = await activate(conn, "chat-1", int(attached["revision"]) + 5)
    require_error(answer, "SESSION_REVISION_MISMATCH", "a wrong revision")


@case(
    "LE-control-restore",
    level=Level.MUST,
    section=f"{LIFECYCLE}; Error › ROOT_GRANT_INVALID",
    rule="RESTORE_SESSION with the grant answers SESSION_RESTORED with the binding and the "
    "grant; a tampered grant is ROOT_GRANT_INVALID.",
    needs={"control"},
)
async def restore(ctx: AgentContext) -> None:
    (ctx.root / "project").mkdir()
    conn = await control(ctx)
    attached = await attach(ctx, conn, "project", "chat-1")
    grant = str(attached["root_grant"])
    tampered = grant[:-2] + ("AA" if not grant.endswith("AA") else "BB")
    require_error(
        await conn.request("RESTORE_SESSION", {"session_id": "chat-1", "root_grant": tampered}),
        "ROOT_GRANT_INVALID",
        "a tampered grant",
    )
    got = require_type(
        await conn.request("RESTORE_SESSION", {"session_id": "chat-1", "root_grant": grant},
                           timeout=30),
        "SESSION_RESTORED",
        "restoring with the grant",
    )  # fmt: skip
    for name in ("session_id", "allowed_root", "fingerprint", "revision", "root_grant"):
        ctx.require(got.get(name) == attached.get(name), f"{name} {got.get(name)!r} differs")


@case(
    "LE-control-detach",
    level=Level.MUST,
    section=LIFECYCLE,
    rule="DETACH_SESSION stops the child (its data connection ends) and answers ACK.",
    needs={"control"},
)
async def detach(ctx: AgentContext) -> None:
    (ctx.root / "project").mkdir()
    conn = await control(ctx)
    attached = await attach(ctx, conn, "project", "chat-1")
    known = len(ctx.platform.connections)
    require_type(
        await activate(conn, "chat-1", attached["revision"]), "SESSION_ACTIVATED", "activate"
    )
    child = await _child(ctx, "chat-1", known)
    answer = await conn.request("DETACH_SESSION", {"session_id": "chat-1"}, timeout=20)
    require_type(answer, "ACK", "detach")
    ended = await child.socket.wait_closed(10)
    ctx.require(ended is not None, "the child's data connection is still open 10 s after DETACH")


@case(
    "LE-control-already-active",
    level=Level.MUST,
    section=f"{LIFECYCLE}; Error › SESSION_ALREADY_ACTIVE",
    rule="An active session's root is immutable: attaching another folder to it is "
    "SESSION_ALREADY_ACTIVE.",
    needs={"control"},
)
async def already_active(ctx: AgentContext) -> None:
    for name in ("one", "two"):
        (ctx.root / name).mkdir()
    conn = await control(ctx)
    attached = await attach(ctx, conn, "one", "chat-1")
    require_type(
        await activate(conn, "chat-1", attached["revision"]), "SESSION_ACTIVATED", "activate"
    )
    browse_id, _, listing = await browse_root(ctx, conn)
    answer = await conn.request(
        "ATTACH_SESSION",
        {"session_id": "chat-1", "browse_id": browse_id,
         "directory_ref": ref_of(ctx, listing, "two"), "expected_connection_id": None},
    )  # fmt: skip
    require_error(
        answer, "SESSION_ALREADY_ACTIVE", "attaching a second folder to an active session"
    )


@case(
    "LE-control-child-cap",
    level=Level.MUST,
    section=f"{LIFECYCLE} (the eight-child safety cap)",
    rule="At most eight children run: a ninth activation is refused with an ERROR.",
    needs={"control"},
    timeout=120,
)
async def child_cap(ctx: AgentContext) -> None:
    for number in range(9):
        (ctx.root / f"p{number}").mkdir()
    conn = await control(ctx)
    answers = []
    for number in range(9):
        attached = await attach(ctx, conn, f"p{number}", f"chat-{number}")
        answers.append(await activate(conn, f"chat-{number}", attached["revision"]))
    refused = [a for a in answers[:8] if a.type != "SESSION_ACTIVATED"]
    ctx.require(
        not refused, f"an activation under the cap got {quote(refused[0]) if refused else ''}"
    )
    ninth = answers[8]
    require_error(ninth, (), "the ninth activation")
    ctx.observe(f"the ninth activation was refused with {ninth.payload.get('code')}")
