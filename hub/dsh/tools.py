"""The model-facing tools (§5, §11.2, §11.3): schemas, argument checks,
computer resolution and renders. Pure; the hub core dispatches them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tetherbed.hub.dsh.actions import ToolError
from tetherbed.hub.dsh.records import Computer
from tetherbed.wire.dsh import constants as C

T = C.ToolErrorCode

_COMPUTER_ARG = {"type": "string", "description": "Computer id or name from computer_list"}
_OPTIONAL_COMPUTER = {
    "type": "string",
    "description": "Computer id or name from computer_list; may be left out when exactly "
    "one connected computer supports file access",
}

COMPUTER_SUMMARY = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "online": {"type": "boolean"},
        "platformLabel": {"type": "string"},
        "os": {"type": "string"},
        "hostname": {"type": "string"},
        "lastSeenAt": {"type": ["string", "null"]},
        "agentVersion": {"type": "string"},
    },
}

#: name -> (description, parameters, output schema, capability it needs)
DEFINITIONS: dict[str, tuple[str, dict[str, Any], dict[str, Any], str | None]] = {
    "computer_list": (
        "List the user's connected computers and whether each is online.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        {
            "type": "object",
            "properties": {"computers": {"type": "array", "items": COMPUTER_SUMMARY}},
            "required": ["computers"],
        },
        None,
    ),
    "computer_exec": (
        "Run a shell command on one of the user's computers and return its output.",
        {
            "type": "object",
            "properties": {
                "computer": _COMPUTER_ARG,
                "command": {"type": "string"},
                "cwd": {"type": "string"},
                "timeoutMs": {"type": "number"},
                "run_in_background": {"type": "boolean"},
            },
            "required": ["computer", "command"],
            "additionalProperties": False,
        },
        {"type": "object"},
        C.Capability.EXEC,
    ),
    "computer_read": (
        "Read a text file on a computer (absolute path), optionally a range of lines.",
        {
            "type": "object",
            "properties": {
                "computer": _OPTIONAL_COMPUTER,
                "path": {"type": "string"},
                "offset": {"type": "number"},
                "limit": {"type": "number"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        {"type": "object"},
        C.Capability.FS,
    ),
    "computer_write": (
        "Write a text file on a computer (absolute path), replacing it.",
        {
            "type": "object",
            "properties": {
                "computer": _OPTIONAL_COMPUTER,
                "path": {"type": "string"},
                "content": {"type": "string"},
                "createDirs": {"type": "boolean"},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
        {"type": "object"},
        C.Capability.FS,
    ),
    "computer_edit": (
        "Replace text in a file on a computer: `old` must occur exactly once unless "
        "replaceAll is true.",
        {
            "type": "object",
            "properties": {
                "computer": _OPTIONAL_COMPUTER,
                "path": {"type": "string"},
                "old": {"type": "string"},
                "new": {"type": "string"},
                "replaceAll": {"type": "boolean"},
            },
            "required": ["path", "old", "new"],
            "additionalProperties": False,
        },
        {"type": "object"},
        C.Capability.FS,
    ),
    "computer_glob": (
        "Find files on a computer by glob pattern (e.g. **/*.py).",
        {
            "type": "object",
            "properties": {
                "computer": _OPTIONAL_COMPUTER,
                "pattern": {"type": "string"},
                "cwd": {"type": "string"},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        {"type": "object"},
        C.Capability.FS,
    ),
    "computer_grep": (
        "Search file contents on a computer with a regular expression.",
        {
            "type": "object",
            "properties": {
                "computer": _OPTIONAL_COMPUTER,
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "include": {"type": "string"},
                "maxMatches": {"type": "number"},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        {"type": "object"},
        C.Capability.FS,
    ),
    "job_output": (
        "Read the output of a background job (computer_exec with run_in_background, or "
        "one promoted at its timeout); `since` is the offset a previous call returned.",
        {
            "type": "object",
            "properties": {"jobId": {"type": "string"}, "since": {"type": "number"}},
            "required": ["jobId"],
            "additionalProperties": False,
        },
        {"type": "object"},
        None,
    ),
    "job_kill": (
        "Stop a background job.",
        {
            "type": "object",
            "properties": {"jobId": {"type": "string"}},
            "required": ["jobId"],
            "additionalProperties": False,
        },
        {"type": "object"},
        None,
    ),
}

FILE_TOOLS = ("computer_read", "computer_write", "computer_edit", "computer_glob", "computer_grep")

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def argument_problems(name: str, args: Any) -> list[str]:
    """Check arguments against the tool's parameter schema (the subset it uses)."""
    parameters = DEFINITIONS[name][1]
    if not isinstance(args, dict):
        return ["arguments must be an object"]
    found = [f"missing `{field}`" for field in parameters.get("required", []) if field not in args]
    properties = parameters["properties"]
    for field, value in args.items():
        spec = properties.get(field)
        if spec is None:
            found.append(f"unknown argument `{field}`")
            continue
        types = _JSON_TYPES[spec["type"]]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            found.append(f"`{field}` must be a {spec['type']}")
    return found


def definition(name: str) -> dict[str, Any]:
    description, parameters, output, _ = DEFINITIONS[name]
    return {
        "name": name,
        "description": description,
        "parameters": parameters,
        "outputSchema": output,
    }


def capabilities_of(computer: Computer) -> tuple[str, ...]:
    """§11.1: no reported capabilities means ["exec"]."""
    return computer.capabilities if computer.capabilities is not None else C.DEFAULT_CAPABILITIES


def offered(computers: Sequence[Computer]) -> list[str]:
    """§11.1: file tools only when some computer of the user reports `fs`."""
    names = ["computer_list", "computer_exec"]
    if any(C.Capability.FS in capabilities_of(c) for c in computers):
        names += FILE_TOOLS
    return [*names, "job_output", "job_kill"]


def resolve(computers: Sequence[Computer], query: str) -> Computer | ToolError:
    """§5.2: exact id, else case-insensitive exact name, else a unique substring."""
    for computer in computers:
        if computer.id == query:
            return computer
    folded = query.strip().casefold()
    exact = [c for c in computers if c.name.casefold() == folded]
    if len(exact) == 1:
        return exact[0]
    candidates = exact or [c for c in computers if folded and folded in c.name.casefold()]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        return ToolError(
            T.UNKNOWN_COMPUTER,
            f"no computer matches {query!r}; run computer_list to see the computers",
            404,
        )
    listed = ", ".join(f"{c.name} ({c.id})" for c in candidates)
    return ToolError(
        T.AMBIGUOUS_COMPUTER,
        f"{query!r} matches several computers: {listed}; pass one of their ids",
        409,
        {"candidates": [{"id": c.id, "name": c.name} for c in candidates]},
    )


def summary(computer: Computer, online: bool, last_seen: str | None) -> dict[str, Any]:
    return {
        "id": computer.id,
        "name": computer.name,
        "online": online,
        "platformLabel": computer.platform_label,
        "os": computer.os,
        "hostname": computer.hostname,
        "lastSeenAt": last_seen,
        "agentVersion": computer.agent_version,
    }


# --- renders -------------------------------------------------------------------


def _cap(text: str, limit: int = C.RENDER_MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 40] + f"\n… [{len(text) - limit + 40} more characters not shown]"


def content(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": _cap(text)}]


def render_list(value: dict[str, Any]) -> list[dict[str, str]]:
    rows = value["computers"]
    if not rows:
        return content("No computers are connected. Connect one in Settings → Computers.")
    lines = ["| name | id | status | platform | last seen |", "|---|---|---|---|---|"]
    for row in rows:
        status = "online" if row["online"] else "offline"
        lines.append(
            f"| {row['name']} | {row['id']} | {status} | {row['platformLabel']} "
            f"| {row['lastSeenAt'] or '-'} |"
        )
    return content("\n".join(lines))


def render_exec(value: dict[str, Any]) -> list[dict[str, str]]:
    if value.get("promoted") or (value.get("jobId") and "exitCode" not in value):
        return content(
            f"$ {value.get('command', '')}\nstill running as background job {value['jobId']}; "
            "read it with job_output, stop it with job_kill"
        )
    code = value.get("exitCode")
    parts = [
        f"$ {value['command']}",
        f"exit {code if code is not None else '-'} · {round(value.get('durationMs', 0))}ms · "
        f"{value['computer']['name']}",
    ]
    if value.get("stdout"):
        parts.append(value["stdout"].rstrip("\n"))
    if value.get("stderr"):
        parts.append("stderr:\n" + value["stderr"].rstrip("\n"))
    if value.get("truncated"):
        parts.append("[output truncated]")
    return content("\n".join(parts))


def render_read(value: dict[str, Any], first_line: int) -> list[dict[str, str]]:
    lines = value["text"].split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    numbered = "\n".join(f"{first_line + i:6}\t{line}" for i, line in enumerate(lines))
    if value.get("truncated"):
        numbered += "\n[truncated: read further with offset]"
    return content(numbered or "(empty file)")


def render_write(value: dict[str, Any]) -> list[dict[str, str]]:
    verb = "Created" if value.get("created") else "Wrote"
    return content(
        f"{verb} {value['path']} ({value['bytes']} bytes) on {value['computer']['name']}"
    )


def render_edit(value: dict[str, Any]) -> list[dict[str, str]]:
    n = value["replacements"]
    return content(
        f"Edited {value['path']} on {value['computer']['name']}: "
        f"{n} replacement{'s' if n != 1 else ''} ({value['bytes']} bytes)"
    )


def render_glob(value: dict[str, Any]) -> list[dict[str, str]]:
    return content("\n".join(value["paths"]) if value["paths"] else "No files matched.")


def render_grep(value: dict[str, Any]) -> list[dict[str, str]]:
    if not value["matches"]:
        return content("No matches.")
    return content("\n".join(f"{m['path']}:{m['line']}: {m['text']}" for m in value["matches"]))


def render_job(value: dict[str, Any]) -> list[dict[str, str]]:
    if value["running"]:
        state = "running"
    elif value.get("killed"):
        state = "killed"
    else:
        state = f"exited {value['exitCode']}" if value.get("exitCode") is not None else "ended"
    head = f"job {value['jobId']} ({value['label']}): {state}"
    if value.get("error"):
        head += f" — {value['error']}"
    return content(head + ("\n" + value["output"] if value["output"] else ""))


def prompt_section(rows: Sequence[dict[str, Any]]) -> str:
    """§5.3: a short paragraph and one line per computer; '' when there are none."""
    if not rows:
        return ""
    lines = ["You can run shell commands on the user's connected computers with `computer_exec`."]
    for row in rows[:13]:
        state = "online" if row["online"] else "offline"
        lines.append(f"- {row['name']} ({row['platformLabel']}, {state})")
    if len(rows) > 13:
        lines.append(f"- … and {len(rows) - 13} more (computer_list shows all)")
    return "\n".join(lines)
