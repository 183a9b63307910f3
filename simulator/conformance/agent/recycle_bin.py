"""FILE_DELETE's recycle-bin mode, judged under the `delete-mode` profile.

Section: File Operations › FILE_DELETE: "Shim's recycle-bin mode (see
SECURITY.md Layer 5 — optional) moves to ~/.autogpt-trash/ instead of
unlinking." Each case runs the agent with `$HOME` in a folder of its own,
outside the root, and `{recycle_bin}` set to `$HOME/.autogpt-trash` (the
spec's place, where an agent that follows it literally puts deleted entries
too). What reached the bin is looked for there — a folder the case set up
around the root, like the path jail's — never asked of the agent.
"""

from __future__ import annotations

from pathlib import Path

from tetherbed.simulator.conformance.agent.answers import require_type, stat
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.platform import AgentConnection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.profiles import Ambiguity, declare
from tetherbed.simulator.conformance.registry import case

DELETE = "File Operations › FILE_DELETE (recycle-bin mode)"
TRASH = ".autogpt-trash"

DELETE_MODE = declare(
    Ambiguity(
        name="delete-mode",
        suites=("agent",),
        question="FILE_DELETE: the shim's recycle-bin mode (optional; the SECURITY.md layer it "
        "points at does not fit) moves entries to ~/.autogpt-trash/ instead of unlinking; "
        "nothing says how names collide or whether a restore record is kept.",
        readings={
            "either": "the deleted entry leaves the root (unlinked, or moved to a bin: reported)",
            "recycle-bin": "the agent runs in its recycle-bin mode ({recycle_bin}, "
            "$HOME/.autogpt-trash): every deleted file and folder lands in the bin with its "
            "bytes, and two deleted entries of one name are both kept",
        },
        default="either",
        notes="docs/spec-notes.md › Files › FILE_DELETE's recycle-bin mode",
    )
)


async def agent_with_bin(ctx: AgentContext) -> tuple[AgentConnection, Path]:
    home = ctx.workspace.base / "home"
    home.mkdir(exist_ok=True)
    trash = home / TRASH
    conn = await ctx.connect(env={"HOME": str(home)}, recycle_bin=str(trash))
    return conn, home


def in_bin(home: Path, data: bytes) -> list[Path]:
    """Files anywhere under the case's $HOME (the bin, whatever its layout) holding `data`."""
    found = []
    for path in home.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
                found.append(path)
        except OSError:
            continue
    return found


async def delete(conn: AgentConnection, path: Path, **fields: object) -> None:
    payload = {"path": str(path), "recursive": False, "missing_ok": False, **fields}
    require_type(await conn.request("FILE_DELETE", payload), "ACK", f"deleting {path.name}")


async def gone(ctx: AgentContext, conn: AgentConnection, path: Path) -> None:
    answer = require_type(await stat(conn, path, False), "FILE_STAT_RESPONSE", "a stat")
    ctx.require(answer.get("exists") is False, f"{path.name} is still in the root")


@case(
    "LE-files-delete-recycle-bin",
    level=Level.MUST,
    section=DELETE,
    rule="Under delete-mode=recycle-bin a deleted file and a deleted folder (recursive) leave "
    "the root and land, bytes intact, in the bin; under `either` they leave the root.",
    reads=("delete-mode",),
)
async def delete_recycle_bin(ctx: AgentContext) -> None:
    file_bytes = b"quarterly numbers\n" + bytes(range(256))
    nested = b"inside a folder that is deleted whole\n"
    path = ctx.write("old.csv", file_bytes)
    ctx.write("folder/deep/inner.txt", nested)
    conn, home = await agent_with_bin(ctx)
    await delete(conn, path)
    await delete(conn, ctx.root / "folder", recursive=True)
    await gone(ctx, conn, path)
    await gone(ctx, conn, ctx.root / "folder")
    kept = bool(in_bin(home, file_bytes)), bool(in_bin(home, nested))
    if ctx.reading("delete-mode") == "recycle-bin":
        ctx.require(kept[0], f"the deleted file is nowhere under $HOME ({home})")
        ctx.require(kept[1], "the deleted folder's file is nowhere under $HOME")
    ctx.observe("moved to the bin" if all(kept) else "unlinked (nothing reached the bin)")


@case(
    "LE-files-recycle-bin-same-name",
    level=Level.MUST,
    section=DELETE,
    rule="Under delete-mode=recycle-bin two deleted files of the same name are both kept "
    "in the bin (a name already taken there never loses an entry).",
    reads=("delete-mode",),
)
async def recycle_bin_same_name(ctx: AgentContext) -> None:
    if ctx.reading("delete-mode") != "recycle-bin":
        ctx.not_applicable("only --profile delete-mode=recycle-bin says where deleted files go")
    first, second = b"the first notes\n", b"the second notes, same name\n"
    ctx.write("a/notes.txt", first)
    ctx.write("b/notes.txt", second)
    conn, home = await agent_with_bin(ctx)
    await delete(conn, ctx.root / "a" / "notes.txt")
    await delete(conn, ctx.root / "b" / "notes.txt")
    ctx.require(in_bin(home, first), "the first notes.txt is no longer in the bin")
    ctx.require(in_bin(home, second), "the second notes.txt is not in the bin")
