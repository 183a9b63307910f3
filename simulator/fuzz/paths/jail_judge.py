"""Run one file operation or command through the agent's real code and judge it.

Operations go through `DataOperations.run` — the dispatcher the agent itself
uses, with its path jail, its file operations and its shell (and with any
planted agent defect applied the way `tetherbed agent --defect` applies it).
The verdict is about the jail only:

- nothing outside the root was read (no sentinel marker, size or mtime in
  the answer, no path outside the root named in it);
- nothing outside the root was written, moved, deleted or created (the
  sentinel tree's snapshot is unchanged);
- a command's working directory was inside the root (it prints `pwd -P`);
- nothing was created in the root under a reserved name;
- every refusal is a `ProtocolError` with one of the spec's codes, and not
  INTERNAL_ERROR (an untyped failure dressed as one).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from tetherbed.agent.operations import DataOperations
from tetherbed.agent.planted_defects import plant
from tetherbed.agent.reserved_names import is_reserved
from tetherbed.runtime.clock import SystemClock
from tetherbed.simulator.fuzz.paths.arena import (
    MARKER,
    SENTINEL_MTIME,
    SENTINEL_SIZE,
    Arena,
)
from tetherbed.simulator.fuzz.paths.path_strategies import swap_paths, wire_paths
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import (
    ExecuteCommand,
    FileDelete,
    FileList,
    FileMove,
    FileRead,
    FileStat,
    FileWrite,
    MessageType,
    Payload,
)

T = MessageType
SPEC_CODES = frozenset(map(str, ErrorCode)) | frozenset(map(str, ExtensionCode))
#: What the fuzzer writes: never the sentinel's marker.
WRITTEN = "written by the path fuzzer\n"


@dataclass(frozen=True, slots=True)
class Operation:
    """One request to run: its type, its payload, and a readable name."""

    name: str
    kind: MessageType
    payload: Payload

    def __repr__(self) -> str:
        return f"{self.name}({msgspec.json.encode(self.payload).decode()})"


def operations(paths: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Operation]:
    """Every file operation, and a command's working directory, on generated
    paths (`wire_paths()` unless told otherwise)."""
    path = paths if paths is not None else wire_paths()
    flag = st.booleans()
    return st.one_of(
        st.builds(lambda p: Operation("read", T.FILE_READ, FileRead(path=p)), path),
        st.builds(
            lambda p, parents: Operation(
                "write", T.FILE_WRITE, FileWrite(path=p, content=WRITTEN, create_parents=parents)
            ),
            path,
            flag,
        ),
        st.builds(
            lambda p: Operation(
                "mkdir",  # there is no FILE_MKDIR: directories come from create_parents
                T.FILE_WRITE,
                FileWrite(path=p.rstrip("/") + "/made.txt", content=WRITTEN, create_parents=True),
            ),
            path,
        ),
        st.builds(
            lambda p, follow: Operation(
                "stat", T.FILE_STAT, FileStat(path=p, follow_symlinks=follow)
            ),
            path,
            flag,
        ),
        st.builds(
            lambda p, recursive, hidden: Operation(
                "list",
                T.FILE_LIST,
                FileList(path=p, recursive=recursive, include_hidden=hidden),
            ),
            path,
            flag,
            flag,
        ),
        st.builds(
            lambda p, recursive: Operation(
                "delete", T.FILE_DELETE, FileDelete(path=p, recursive=recursive)
            ),
            path,
            flag,
        ),
        st.builds(
            lambda src, dst, overwrite: Operation(
                "move", T.FILE_MOVE, FileMove(src=src, dst=dst, overwrite=overwrite)
            ),
            path,
            path,
            flag,
        ),
        st.builds(lambda p: Operation("cwd", T.EXECUTE_COMMAND, _pwd(p)), path),
    )


def swap_operations() -> st.SearchStrategy[Operation]:
    """Every operation on paths through the directory being swapped."""
    return operations(swap_paths())


def swap_working_directories() -> st.SearchStrategy[Operation]:
    """Only commands, run in a directory being swapped."""
    return swap_paths().map(lambda p: Operation("cwd", T.EXECUTE_COMMAND, _pwd(p)))


def _pwd(cwd: str | None) -> ExecuteCommand:
    return ExecuteCommand(argv=["pwd", "-P"], cwd=cwd, timeout_seconds=20)


class JailJudge:
    """The agent's operations on one arena, and the verdict on each run."""

    def __init__(self, arena: Arena, *, defects: Iterable[str] = ()) -> None:
        self.arena = arena
        self.defects = frozenset(defects)
        self.loop = asyncio.new_event_loop()
        self.operations: Any = None

    def close(self) -> None:
        if self.operations is not None:
            self.loop.run_until_complete(self.operations.close())
        self.loop.close()

    def fresh(self) -> None:
        """A new agent on a freshly rebuilt root (the last example may have wrecked it)."""
        if self.operations is not None:
            self.loop.run_until_complete(self.operations.close())
        self.arena.reset_root()
        self.arena.restore_sentinels()
        self.reserved_before = self._reserved_in_root()
        operations = DataOperations(
            root=str(self.arena.root), clock=SystemClock(), agent_env={}, offload=False
        )
        self.operations = plant(operations, self.defects)

    def run(self, operation: Operation) -> list[str]:
        """Run `operation`; the jail breaches it shows (empty: none)."""
        encoded = self.arena.expand(msgspec.json.encode(operation.payload).decode())
        payload = msgspec.json.decode(encoded, type=type(operation.payload))
        try:
            _, answer = self.loop.run_until_complete(self.operations.run(operation.kind, payload))
        except ProtocolError as error:
            return self.judge_refusal(error) + self.judge_world()
        return self.judge_answer(operation, answer) + self.judge_world()

    def judge_refusal(self, error: ProtocolError) -> list[str]:
        code = str(error.code)
        problems = []
        if code not in SPEC_CODES:
            problems.append(f"refused with {code!r}, not a spec code: {error.message}")
        elif code == ErrorCode.INTERNAL_ERROR:
            problems.append(f"refused with INTERNAL_ERROR (an untyped failure): {error.message}")
        if MARKER in error.message or MARKER in repr(error.details):
            problems.append("the refusal carries the sentinel's contents")
        return problems

    def judge_answer(self, operation: Operation, answer: Payload) -> list[str]:
        problems: list[str] = []
        encoded = msgspec.json.encode(answer).decode()
        if MARKER in encoded:
            problems.append(f"{operation.name} returned the sentinel's contents")
        for field, value in _fields(msgspec.to_builtins(answer)):
            if field == "mtime" and value == SENTINEL_MTIME:
                problems.append(f"{operation.name} returned a sentinel entry's mtime")
            if field == "size_bytes" and value == SENTINEL_SIZE:
                problems.append(f"{operation.name} returned a sentinel file's size")
            if field == "path" and isinstance(value, str) and not self.arena.inside(value):
                problems.append(f"{operation.name} named {value!r}, outside the root")
        if operation.kind is T.EXECUTE_COMMAND:
            where = getattr(answer, "stdout", "").strip()
            if getattr(answer, "exit_code", 1) == 0 and not self.arena.inside(where):
                problems.append(f"the command ran in {where!r}, outside the root")
        return problems

    def judge_world(self) -> list[str]:
        problems = self.arena.changes()
        created = self._reserved_in_root() - self.reserved_before
        problems += [f"created a reserved name in the root: {p}" for p in sorted(created)]
        return problems

    def _reserved_in_root(self) -> set[str]:
        found = set()
        for directory, dirs, files in os.walk(self.arena.root):
            for name in (*dirs, *files):
                if is_reserved(name):
                    found.add(os.path.relpath(os.path.join(directory, name), self.arena.root))
        return found


def _fields(value: Any) -> Iterable[tuple[str, Any]]:
    """Every (key, value) pair in a decoded answer, nested ones too."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _fields(item)
    elif isinstance(value, list):
        for item in value:
            yield from _fields(item)
