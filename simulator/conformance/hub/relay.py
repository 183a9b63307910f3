"""A session served by a raw agent with a client attached: the set-up most hub cases share."""

from __future__ import annotations

from dataclasses import dataclass

from tetherbed.simulator.conformance.hub.clients import RecordedClient
from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.hub.raw_agent import RawAgent
from tetherbed.simulator.targets import OpenRefused


@dataclass(slots=True)
class Served:
    session: str
    agent: RawAgent
    client: RecordedClient


async def served_session(
    ctx: HubContext, *, machine: str = "machine-a", session: str | None = None
) -> Served:
    session = session or ctx.new_session()
    agent = await ctx.serving_agent(session, machine=machine)
    try:
        client = await ctx.client(session)
    except OpenRefused as exc:
        ctx.depart(f"the client of a served session was refused ({exc.status})")
    return Served(session, agent, client)


def stat_payload(path: str = "/srv/conform/a.txt") -> dict:
    return {"path": path, "follow_symlinks": True}
