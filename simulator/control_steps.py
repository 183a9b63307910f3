"""A scenario's control-plane steps: browse, attach, activate, restore, detach.

Each is a request a machine client sends through the hub to the machine's
control agent, recorded like every other request (invoke, then ok / fail /
info). What a request needs from an earlier one — the browse id and a
directory reference, an attach's revision, its root grant — is taken from the
answer that earlier request got, as the platform would take it; a step whose
`from` request has no usable answer fails, naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tetherbed.simulator.client import ScenarioClient
from tetherbed.simulator.scenario import Step
from tetherbed.simulator.scenario.control import REQUEST_TYPES, STEP_KINDS

if TYPE_CHECKING:
    from tetherbed.simulator.runner import ScenarioRunner

__all__ = ["STEP_KINDS", "ControlSteps", "StepFailed"]


class StepFailed(Exception):
    """A step's `from` request has no answer it can use (the runner reports it)."""


class ControlSteps:
    def __init__(self, runner: ScenarioRunner) -> None:
        self.runner = runner

    async def run_step(self, step: Step) -> None:
        args = step.args
        client = self.runner.clients[args["client"]]
        assert isinstance(client, ScenarioClient)
        payload = self.payload(step.kind, args, client)
        await client.send(str(args["id"]), REQUEST_TYPES[step.kind], payload)

    def payload(self, kind: str, args: dict[str, Any], client: ScenarioClient) -> dict[str, Any]:
        if kind == "browse":
            if "from" not in args:
                return {"browse_id": None, "directory_ref": None}
            listing = _answer(client, args["from"])
            if "entry" not in args:
                raise StepFailed("browse with `from` needs the `entry` to open")
            return {
                "browse_id": listing.get("browse_id"),
                "directory_ref": _entry(listing, args["entry"], args["from"])["directory_ref"],
            }
        if kind == "attach":
            listing = _answer(client, args["from"])
            if "entry" in args:
                chosen = _entry(listing, args["entry"], args["from"])
            else:
                chosen = listing.get("current") or {}
                if not chosen.get("directory_ref"):
                    raise StepFailed(f"the listing of {args['from']!r} has no current directory")
            return {
                "session_id": args["session"],
                "browse_id": listing.get("browse_id"),
                "directory_ref": chosen["directory_ref"],
            }
        if kind == "activate":
            binding = _answer(client, args["from"])
            return {"session_id": args["session"], "revision": binding.get("revision")}
        if kind == "restore":
            binding = _answer(client, args["from"])
            return {"session_id": args["session"], "root_grant": binding.get("root_grant")}
        return {"session_id": args["session"]}  # detach


def _answer(client: ScenarioClient, request_id: str) -> dict[str, Any]:
    found = client.answers.get(request_id)
    if found is None:
        raise StepFailed(
            f"request {request_id!r} has no successful control answer yet "
            "(wait for it with `expect` first)"
        )
    return found


def _entry(listing: dict[str, Any], wanted: str, source: str) -> dict[str, Any]:
    for entry in listing.get("entries") or []:
        if isinstance(entry, dict) and wanted in (entry.get("name"), entry.get("path")):
            return entry
    names = [e.get("name") for e in listing.get("entries") or [] if isinstance(e, dict)]
    raise StepFailed(f"the listing of {source!r} has no entry {wanted!r} (it has {names})")
