"""The path jail: the attack table every FILE_* operation and cwd must refuse.

Sections: Shell Execution (allowed_root constrains FILE_* operations and the
working directory); FILE_WRITE › create_parents jail semantics; FILE_STAT;
FILE_MOVE (both endpoints jail-checked); Error › PATH_OUTSIDE_ALLOWED_ROOT,
PATH_INVALID_CHARS. Each case puts a secret outside the root and judges the
answer: it must never carry the secret, and nothing may appear outside.
"""

from __future__ import annotations

from tetherbed.simulator.conformance.agent.answers import (
    command,
    quote,
    read_text,
    require_error,
    stat,
    write_text,
)
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.profiles import Ambiguity, declare
from tetherbed.simulator.conformance.recorded_socket import Frame
from tetherbed.simulator.conformance.registry import case

OUTSIDE = "PATH_OUTSIDE_ALLOWED_ROOT"
SECRET = "the secret outside the root\n"
SECTION = "Shell Execution (allowed_root constrains FILE_* operations); Error"

RELATIVE = declare(
    Ambiguity(
        name="relative-paths",
        suites=("agent",),
        question="Every spec example path is absolute; the public shim resolves a relative "
        "path against its own working directory, Tetherbed's agent against the allowed root.",
        readings={
            "either": "a relative path is taken from the root, or refused with a PATH_* error",
            "root": "a relative path is taken from the allowed root",
            "cwd": "a relative path is taken from the shim's working directory (so it is "
            "refused unless that lies inside the root)",
        },
        default="either",
        notes="docs/spec-notes.md › Files › Relative paths",
    )
)


def _fixture(ctx: AgentContext) -> None:
    (ctx.outside / "secret.txt").write_text(SECRET)
    (ctx.root / "link-out").symlink_to(ctx.outside, target_is_directory=True)
    (ctx.root / "secret-alias.txt").symlink_to(ctx.outside / "secret.txt")
    ctx.write("inside.txt", "inside\n")


def _refused(
    ctx: AgentContext, answer: Frame, what: str, codes: tuple[str, ...] = (OUTSIDE,)
) -> None:
    if answer.type != "ERROR" and SECRET.strip() in str(answer.payload):
        ctx.depart(f"{what}: the secret outside the root came back ({quote(answer)})")
    require_error(answer, codes, what)


def _untouched(ctx: AgentContext, *names: str) -> None:
    made = [n for n in names if (ctx.outside / n).exists()]
    ctx.require(not made, f"created outside the root: {made}")
    ctx.require((ctx.outside / "secret.txt").read_text() == SECRET, "the secret was changed")


@case(
    "LE-jail-dotdot",
    level=Level.MUST,
    section=SECTION,
    rule="A path that climbs out of the root with .. is PATH_OUTSIDE_ALLOWED_ROOT.",
)
async def dotdot(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    path = f"{ctx.root}/../outside/secret.txt"
    _refused(ctx, await read_text(conn, path), "a read through ..")


@case(
    "LE-jail-absolute-elsewhere",
    level=Level.MUST,
    section=SECTION,
    rule="An absolute path elsewhere on the machine is PATH_OUTSIDE_ALLOWED_ROOT.",
)
async def absolute(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    _refused(ctx, await read_text(conn, ctx.outside / "secret.txt"), "a read outside the root")
    _refused(ctx, await read_text(conn, "/etc/hostname"), "a read of /etc/hostname")


@case(
    "LE-jail-symlink-out-read",
    level=Level.MUST,
    section=SECTION,
    rule="A read through a symlink that leads out of the root (a linked folder or a linked "
    "file) is PATH_OUTSIDE_ALLOWED_ROOT.",
)
async def symlink_read(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    _refused(ctx, await read_text(conn, ctx.root / "link-out" / "secret.txt"), "a linked folder")
    _refused(ctx, await read_text(conn, ctx.root / "secret-alias.txt"), "a linked file")


@case(
    "LE-jail-symlink-out-write",
    level=Level.MUST,
    section=SECTION,
    rule="A write through a symlink out of the root is refused and creates nothing outside.",
)
async def symlink_write(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    answer = await write_text(conn, ctx.root / "link-out" / "planted.txt", "planted\n")
    _refused(ctx, answer, "a write through a linked folder")
    answer = await write_text(conn, ctx.root / "secret-alias.txt", "overwritten\n")
    _refused(ctx, answer, "a write through a linked file")
    _untouched(ctx, "planted.txt")


@case(
    "LE-jail-symlink-out-stat",
    level=Level.MUST,
    section=f"{SECTION}; File Operations › FILE_STAT",
    rule="FILE_STAT through a symlink out of the root is PATH_OUTSIDE_ALLOWED_ROOT.",
)
async def symlink_stat(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    _refused(ctx, await stat(conn, ctx.root / "link-out" / "secret.txt"), "stat through a link")


@case(
    "LE-jail-symlink-out-list",
    level=Level.MUST,
    section=f"{SECTION}; File Operations › FILE_LIST",
    rule="FILE_LIST of a linked folder outside the root is refused: nothing outside is listed.",
)
async def symlink_list(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    answer = await conn.request(
        "FILE_LIST",
        {"path": str(ctx.root / "link-out"), "glob": None, "recursive": False,
         "include_hidden": False, "max_entries": 100},
    )  # fmt: skip
    if answer.type == "FILE_LIST_RESPONSE":
        names = [e.get("name") for e in answer.payload.get("entries") or []]
        ctx.require("secret.txt" not in names, f"the outside folder was listed: {names}")
    else:
        require_error(answer, OUTSIDE, "listing a linked folder outside the root")


@case(
    "LE-jail-symlink-out-delete",
    level=Level.MUST,
    section=f"{SECTION}; File Operations › FILE_DELETE",
    rule="FILE_DELETE through a symlink out of the root is refused and deletes nothing outside.",
)
async def symlink_delete(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    answer = await conn.request(
        "FILE_DELETE",
        {"path": str(ctx.root / "link-out" / "secret.txt"), "recursive": False,
         "missing_ok": False},
    )  # fmt: skip
    _refused(ctx, answer, "a delete through a linked folder")
    ctx.require((ctx.outside / "secret.txt").exists(), "the file outside the root was deleted")


@case(
    "LE-jail-symlink-out-move",
    level=Level.MUST,
    section=f"{SECTION}; File Operations › FILE_MOVE",
    rule="Both FILE_MOVE endpoints are jail-checked: out of the root through a link, and from "
    "outside in, are refused.",
)
async def symlink_move(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    inward = await conn.request(
        "FILE_MOVE",
        {"src": str(ctx.root / "link-out" / "secret.txt"), "dst": str(ctx.root / "got.txt"),
         "overwrite": False},
    )  # fmt: skip
    _refused(ctx, inward, "moving a file from outside in")
    outward = await conn.request(
        "FILE_MOVE",
        {"src": str(ctx.root / "inside.txt"), "dst": str(ctx.root / "link-out" / "out.txt"),
         "overwrite": False},
    )  # fmt: skip
    _refused(ctx, outward, "moving a file out through a link")
    _untouched(ctx, "out.txt")
    ctx.require((ctx.outside / "secret.txt").exists(), "the outside file was moved")


@case(
    "LE-jail-symlink-loop",
    level=Level.MUST,
    section="Error (every request gets a response)",
    rule="A symlink loop is answered with an ERROR (the connection carries on), never a hang "
    "or a crash.",
)
async def symlink_loop(ctx: AgentContext) -> None:
    (ctx.root / "loop-a").symlink_to(ctx.root / "loop-b")
    (ctx.root / "loop-b").symlink_to(ctx.root / "loop-a")
    ctx.write("inside.txt", "inside\n")
    conn = await ctx.connect()
    require_error(await read_text(conn, ctx.root / "loop-a"), (), "reading a symlink loop")
    after = await read_text(conn, ctx.root / "inside.txt")
    ctx.require(after.type == "FILE_CONTENTS", f"the next read got {quote(after)}")


@case(
    "LE-jail-create-parents-outside",
    level=Level.MUST,
    section="File Operations › FILE_WRITE › create_parents jail semantics",
    rule="create_parents with a lexical parent outside the root is rejected before anything "
    "is created.",
)
async def create_parents_lexical(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    answer = await write_text(conn, ctx.outside / "made" / "f.txt", "x\n", create_parents=True)
    _refused(ctx, answer, "create_parents outside the root")
    _untouched(ctx, "made")


@case(
    "LE-jail-create-parents-symlink",
    level=Level.MUST,
    section="File Operations › FILE_WRITE › create_parents jail semantics",
    rule="create_parents through a symlink whose target is outside the root is rejected: the "
    "realpath of the nearest existing ancestor is checked.",
)
async def create_parents_symlink(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    answer = await write_text(
        conn, ctx.root / "link-out" / "made" / "f.txt", "x\n", create_parents=True
    )
    _refused(ctx, answer, "create_parents through a link")
    _untouched(ctx, "made")


@case(
    "LE-jail-nul",
    level=Level.MUST,
    section="Error › PATH_INVALID_CHARS",
    rule="A path containing NUL is PATH_INVALID_CHARS.",
)
async def nul(ctx: AgentContext) -> None:
    ctx.write("inside.txt", "inside\n")
    conn = await ctx.connect()
    answer = await read_text(conn, f"{ctx.root}/inside.txt\x00.png")
    require_error(answer, "PATH_INVALID_CHARS", "a path with NUL")


@case(
    "LE-jail-long-name",
    level=Level.MUST,
    section="Error (every request gets a response)",
    rule="A name longer than the file system allows is answered with an ERROR and creates nothing.",
)
async def long_name(ctx: AgentContext) -> None:
    conn = await ctx.connect()
    answer = await write_text(conn, ctx.root / ("n" * 300), "x\n")
    require_error(answer, (), "a 300-byte name")
    listing = await conn.request(
        "FILE_LIST",
        {"path": str(ctx.root), "glob": None, "recursive": False, "include_hidden": True,
         "max_entries": 100},
    )  # fmt: skip
    names = [e.get("name") for e in listing.payload.get("entries") or []]
    ctx.require(not any(str(n).startswith("nnnn") for n in names), "something was created")


@case(
    "LE-jail-relative-dotdot",
    level=Level.MUST,
    section=SECTION,
    rule="A relative path that climbs out (../outside/...) is refused under any reading of "
    "relative paths.",
)
async def relative_dotdot(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    answer = await read_text(conn, "../outside/secret.txt")
    _refused(ctx, answer, "a relative path with ..", (OUTSIDE, "PATH_NOT_FOUND"))


@case(
    "LE-jail-relative-path",
    level=Level.MUST,
    section=SECTION,
    rule="A relative path is resolved under the profile's reading (root or the shim's working "
    "directory) and never reaches a file outside the root.",
    reads=("relative-paths",),
)
async def relative(ctx: AgentContext) -> None:
    _fixture(ctx)
    (ctx.workspace.base / "inside.txt").write_text(SECRET)  # the decoy in the working directory
    conn = await ctx.connect()
    answer = await read_text(conn, "inside.txt")
    reading = ctx.reading("relative-paths")
    if answer.type == "FILE_CONTENTS":
        content = answer.payload.get("content")
        ctx.require(content != SECRET, "a relative path read the decoy outside the root")
        ctx.require(content == "inside\n", f"a relative path read {content!r}")
        ctx.require(reading != "cwd", "taken from the root, not the working directory")
        ctx.observe("relative paths are taken from the root")
    else:
        ctx.require(reading != "root", f"a relative path was answered {quote(answer)}")
        require_error(answer, (OUTSIDE, "PATH_NOT_FOUND", "PATH_INVALID_CHARS"), "a relative path")
        ctx.observe(f"a relative path was refused with {answer.payload.get('code')}")


@case(
    "LE-jail-cwd",
    level=Level.MUST,
    section="Shell Execution (allowed_root constrains the subprocess working directory)",
    rule="EXECUTE_COMMAND with cwd outside the root (directly or through a link) is refused and "
    "nothing runs.",
    needs={"shell"},
)
async def cwd(ctx: AgentContext) -> None:
    _fixture(ctx)
    conn = await ctx.connect()
    if "shell" not in conn.granted:
        ctx.not_applicable("the agent does not advertise the shell")
    for where in (ctx.outside, ctx.root / "link-out"):
        answer = await command(conn, argv=["touch", "ran-here"], cwd=str(where), timeout_seconds=10)
        _refused(ctx, answer, f"cwd {where}")
    _untouched(ctx, "ran-here")
