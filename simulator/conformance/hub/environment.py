"""Running hub cases: the hub under test, raw agents, clients through the adapters.

One hub serves the whole run (every case uses sessions of its own, with
fresh ids, so cases do not meet); a case that stops the hub (`needs
own_hub`) gets a private instance when Tetherbed can start one. The hub is
Tetherbed's own (started here), a command Tetherbed starts, or a running
service at a URL, exactly as docs/targets.md describes; its client and admin
APIs are reached only through the target's adapters.

Timings: a hub Tetherbed starts gets short ones (PING every 3 s, ...) through
its flags or `{options}`, so that cases about keepalive and deadlines take
seconds, not minutes; a hub at a URL is assumed to use the spec's 30 s PING
and 10 s PONG and Tetherbed's request deadline, unless `--hub-option` says
what it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.simulator.backends.process import hub_arguments
from tetherbed.simulator.conformance.case import Case, Context
from tetherbed.simulator.conformance.environment import TargetUnavailable
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.hub.clients import RecordedClient
from tetherbed.simulator.conformance.hub.raw_agent import RawAgent
from tetherbed.simulator.conformance.profiles import Profile
from tetherbed.simulator.targets import (
    AdminAdapter,
    HubAccess,
    OpenRefused,
    Target,
    TargetError,
    admin_adapter,
    client_adapter,
)
from tetherbed.simulator.targets.adapters import load_class
from tetherbed.simulator.targets.running import HubRunner

#: What a hub Tetherbed starts is told (seconds), and what a URL hub is assumed to use.
SHORT_TIMINGS = {
    "ping_interval": 3.0,
    "pong_timeout": 3.0,
    "request_timeout": 5.0,
    "command_slack": 2.0,
    "retry_window": 8.0,
}
SPEC_TIMINGS = {
    "ping_interval": 30.0,
    "pong_timeout": 10.0,
    "request_timeout": 60.0,
    "command_slack": 10.0,
    "retry_window": 70.0,
}


@dataclass(frozen=True, slots=True)
class Timings:
    ping_interval: float
    pong_timeout: float
    request_timeout: float
    command_slack: float
    retry_window: float

    @property
    def answer_deadline(self) -> float:
        """How long any request may wait for its answer, whatever the agent does."""
        return max(self.request_timeout, self.retry_window) + 10.0


@dataclass(slots=True)
class HubInstance:
    runner: HubRunner
    access: HubAccess
    workdir: Path


class HubContext(Context):
    def __init__(
        self, case: Case, evidence: Evidence, profile: Profile, environment: HubEnvironment
    ) -> None:
        super().__init__(case, evidence, profile)
        self.environment = environment
        self.timings = environment.timings
        self.instance = environment.shared
        self.agents: list[RawAgent] = []
        self.clients: list[RecordedClient] = []
        self._adapters: list[Any] = []
        self._own: HubInstance | None = None

    @property
    def access(self) -> HubAccess:
        assert self.instance is not None
        return self.instance.access

    @property
    def user(self) -> str:
        return self.environment.users[0]

    @property
    def other_user(self) -> str | None:
        users = self.environment.users
        return users[1] if len(users) > 1 else None

    def new_session(self) -> str:
        return f"conform-{secrets.token_hex(6)}"

    # --- raw agents ------------------------------------------------------------------

    def agent(
        self,
        session: str | None,
        *,
        machine: str = "machine-a",
        user: str | None = None,
        token: str | bool | None = True,
    ) -> RawAgent:
        """A raw agent (not yet connected). `token`: True for the user's agent token,
        a string for that token, None for no Authorization header."""
        if token is True:
            token = self.access.tokens.get(user or self.user, "agent")
        raw = RawAgent(
            self.evidence,
            f"agent#{len(self.agents) + 1} ({machine})",
            url=self.access.url,
            token=token if isinstance(token, str) else None,
            session=session,
            machine=machine,
            ssl_context=self.access.ssl,
        )
        self.agents.append(raw)
        return raw

    async def serving_agent(
        self, session: str, *, machine: str = "machine-a", user: str | None = None,
        hello: dict[str, Any] | None = None,
    ) -> RawAgent:  # fmt: skip
        """A raw agent that completed its handshake (the case departs otherwise)."""
        raw = self.agent(session, machine=machine, user=user)
        answer = await raw.connect(hello)
        if answer is None or answer.type != "HELLO_ACK":
            got = answer.describe() if answer is not None else "nothing"
            ending = raw.socket.ending if raw.socket is not None else None
            if ending is not None and answer is None:
                got = f"a close {ending.code} {ending.reason}"
            self.depart(f"the hub answered a valid HELLO with {got}")
        return raw

    # --- clients ---------------------------------------------------------------------

    async def client(self, session: str, user: str | None = None) -> RecordedClient:
        """A client of the session through the adapter; OpenRefused passes through."""
        user = user or self.user
        adapter = client_adapter(self.environment.target.client_adapter, self.access)
        self._adapters.append(adapter)
        self.evidence.add(f"client {user}", "sent", "connect", f"open session {session}")
        try:
            session_client = await asyncio.wait_for(adapter.open(session, user), 15)
        except OpenRefused as exc:
            self.evidence.add(f"client {user}", "received", "refused", f"refused: {exc.status}")
            raise
        recorded = RecordedClient(
            session_client, self.evidence, f"client {user}#{len(self.clients) + 1}"
        )
        self.clients.append(recorded)
        return recorded

    def admin(self, access: HubAccess | None = None) -> AdminAdapter:
        adapter = admin_adapter(self.environment.target.admin_adapter, access or self.access)
        self._adapters.append(adapter)
        return adapter

    # --- a hub of the case's own -----------------------------------------------------

    async def own_hub(self) -> HubInstance:
        """A private hub instance (a case that stops its hub); not for a URL hub."""
        if not self.environment.target.hub.startable:
            self.not_applicable("the hub is a running service: Tetherbed cannot start another")
        self._own = await self.environment.start_instance(f"{self.case.id}-")
        self.instance = self._own
        return self._own

    async def close(self) -> None:
        for raw in self.agents:
            await raw.shutdown()
        for client in self.clients:
            await client.close()
        for adapter in self._adapters:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(adapter.close(), 5)
        if self._own is not None:
            await self.environment.stop_instance(self._own)


class HubEnvironment:
    def __init__(
        self,
        target: Target,
        *,
        options: dict[str, Any],
        timings: Timings,
        users: list[str] | None,
        reference_args: list[str],
    ) -> None:
        self.target = target
        self.options = options
        self.timings = timings
        self._wanted_users = users
        self.users: list[str] = users or ["alice", "bob"]
        self.reference_args = reference_args
        self.shared: HubInstance | None = None
        self._base: Path | None = None
        self.description = target.describe().split(", ", 1)[1]
        self.details: dict[str, Any] = {
            "hub": self.description,
            "client adapter": target.client_adapter,
            "admin adapter": target.admin_adapter,
            "timings": ", ".join(f"{k} {v:g} s" for k, v in sorted(vars_of(timings).items())),
        }
        if target.hub.command:
            self.details["command"] = " ".join(target.hub.command)
        if reference_args:
            self.details["reference hub flags"] = " ".join(reference_args)

    async def start(self) -> None:
        for spec, where in (
            (self.target.client_adapter, "client adapter"),
            (self.target.admin_adapter, "admin adapter"),
        ):
            try:
                load_class(spec, where)
            except TargetError as exc:
                raise TargetUnavailable(f"{exc} (is its folder on PYTHONPATH?)") from None
        self._base = Path(tempfile.mkdtemp(prefix="tetherbed-conform-hub-"))
        self.shared = await self.start_instance("shared-")
        known = sorted(self.shared.access.tokens.users())
        if self._wanted_users is None:
            self.users = [u for u in ("alice", "bob") if u in known] or known
            self.users += [u for u in known if u not in self.users]
        missing = [u for u in self.users if u not in known]
        if missing:
            raise TargetUnavailable(f"the hub's tokens have no user {missing}")

    async def start_instance(self, prefix: str) -> HubInstance:
        assert self._base is not None
        workdir = Path(tempfile.mkdtemp(prefix=prefix[:40], dir=self._base))
        runner = HubRunner(
            self.target.hub,
            self.target.tls,
            workdir,
            users=self._wanted_users or ["alice", "bob"],
            options=self.options,
            reference_args=[*hub_arguments(self.options), *self.reference_args],
        )
        try:
            runner.prepare()
            await asyncio.to_thread(runner.start)
            access = runner.access()
        except TargetError as exc:
            if runner.process is not None:
                await asyncio.to_thread(runner.process.stop)
            raise TargetUnavailable(str(exc)) from None
        return HubInstance(runner, access, workdir)

    async def stop_instance(self, instance: HubInstance) -> None:
        if instance.runner.process is not None:
            await asyncio.to_thread(instance.runner.process.stop)

    async def stop(self) -> None:
        if self.shared is not None:
            await self.stop_instance(self.shared)
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)

    def applicable(self, case: Case) -> str | None:
        if "two_users" in case.needs and len(self.users) < 2:
            return "the hub's tokens name only one user (tenant cases need two)"
        return None

    @contextlib.asynccontextmanager
    async def context(
        self, case: Case, evidence: Evidence, profile: Profile
    ) -> AsyncIterator[HubContext]:
        context = HubContext(case, evidence, profile, self)
        try:
            yield context
        finally:
            await context.close()


def vars_of(timings: Timings) -> dict[str, float]:
    return {name: getattr(timings, name) for name in Timings.__dataclass_fields__}


def build_timings(startable: bool, overrides: dict[str, float]) -> tuple[Timings, dict[str, Any]]:
    """The timings cases judge by, and the options a started hub is given."""
    base = dict(SHORT_TIMINGS if startable else SPEC_TIMINGS)
    base.update(overrides)
    return Timings(**base), (dict(base) if startable else {})
