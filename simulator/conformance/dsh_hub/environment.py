"""Running dsh-hub cases: one hub, raw SSE agents, a browser, and the adapter.

One hub serves the run. The spec allows one pending key per user ("creating
a new one invalidates earlier pending keys", §4.2), so a case that creates
keys holds one of the hub's users for its whole run: cases of different
users run at once, cases of one user in turn. Tetherbed's own hub is given
eight users and short timings (a heartbeat of 2 s, keys that expire after
6 s) so that presence, ping and expiry cases take seconds; a hub at a URL is
held to the timings `--hub-option` names (default: the spec's 20 s
heartbeat and 15 min keys; the expiry case is then skipped).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.case import Case, Context
from tetherbed.simulator.conformance.dsh_hub.adapter import DshHubAdapter, ExecOutcome
from tetherbed.simulator.conformance.dsh_hub.http import HttpAnswer, RecordedHttp
from tetherbed.simulator.conformance.dsh_hub.raw_agent import HELLO_WAIT, RawSseAgent
from tetherbed.simulator.conformance.environment import TargetUnavailable
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.profiles import Profile
from tetherbed.simulator.targets import HubAccess, Target, TargetError
from tetherbed.simulator.targets.adapters import load_class
from tetherbed.simulator.targets.hub import Tokens
from tetherbed.simulator.targets.running import HubRunner
from tetherbed.wire.dsh import constants as C

DEFAULT_ADAPTER = "tetherbed.simulator.conformance.dsh_hub.adapter:TetherbedDshHub"
#: Timings a hub Tetherbed starts is given, and a URL hub is assumed to use.
SHORT = {"heartbeat_ms": 2000, "key_ttl_minutes": 0.1}
SPEC = {"heartbeat_ms": C.HEARTBEAT_MS, "key_ttl_minutes": C.KEY_TTL_MINUTES}
#: Users Tetherbed's own hub is given (cases that create keys run this many at once).
USERS = [f"dsh{n}" for n in range(1, 9)]


class DshHubContext(Context):
    def __init__(
        self,
        case: Case,
        evidence: Evidence,
        profile: Profile,
        environment: DshHubEnvironment,
        user: str,
    ) -> None:
        super().__init__(case, evidence, profile)
        self.environment = environment
        self.user = user
        self.access = environment.access
        self.heartbeat_s = environment.timings["heartbeat_ms"] / 1000
        self.key_ttl_s = environment.timings["key_ttl_minutes"] * 60
        self.adapter: DshHubAdapter = environment.adapter_for(user)
        self.browser_http = RecordedHttp(self.access.http_url, evidence, "browser", self.access.ssl)
        self.agents: list[RawSseAgent] = []

    # --- peers -----------------------------------------------------------------------

    def agent(self) -> RawSseAgent:
        raw = RawSseAgent(
            self.access.http_url, self.evidence, f"agent#{len(self.agents) + 1}", self.access.ssl
        )
        self.agents.append(raw)
        return raw

    async def browser(
        self,
        method: str,
        route: str,
        body: Any = None,
        *,
        query: str = "",
        headers: dict[str, str] | None = None,
        admitted: bool = True,
    ) -> HttpAnswer:
        """A §4 route, through the host request gate (the adapter's headers) unless not."""
        sent = dict(self.adapter.browser_headers()) if admitted else {}
        sent.update(headers or {})
        return await self.browser_http.request(
            method,
            C.url(route) + query,
            body=body,
            headers=sent,
            note="admitted" if admitted else "no credentials",
        )

    async def new_key(self, **fields: Any) -> str:
        """A fresh enrollment key of the case's user (§4.2)."""
        answer = await self.browser(
            "POST", C.Route.KEYS, {"os": "linux", "replace": False, "label": None, **fields}
        )
        value = answer.json()
        if (
            answer.status != 200
            or not isinstance(value, dict)
            or not isinstance(value.get("key"), str)
        ):
            self.depart(f"POST /keys did not give a key: {answer.describe()}")
        return value["key"]

    async def enrolled(
        self, *, capabilities: list[str] | None = None, connect: bool = True
    ) -> RawSseAgent:
        """A raw agent enrolled with a fresh key and, with `connect`, streaming (hello seen)."""
        raw = self.agent()
        key = await self.new_key()
        answer = await raw.enroll(key, capabilities=capabilities)
        if answer.status != 200 or raw.token is None or raw.computer_id is None:
            self.depart(f"enroll with a fresh key was answered {answer.describe()}")
        if connect:
            await self.streaming(raw)
        return raw

    async def streaming(self, raw: RawSseAgent, token: str | None = None) -> None:
        stream = await raw.connect(token)
        if stream.status != 200:
            self.depart(f"the events stream was refused: HTTP {stream.status}")
        if await stream.next_event(C.Event.HELLO, HELLO_WAIT) is None:
            self.depart(f"no hello within {HELLO_WAIT:g} s of opening the stream")

    async def exec(self, computer: str, command: str, **options: Any) -> ExecOutcome:
        """One computer_exec through the adapter, recorded as the caller saw it."""
        self.evidence.add(
            "caller", "sent", "tool", f"computer_exec {computer} {command!r} {options}"
        )
        outcome = await self.adapter.exec(computer, command, **options)
        for stream, data in outcome.output:
            self.evidence.add(
                "caller", "received", "output", f"{stream}: {data[:200]!r}", len(data)
            )
        self.evidence.add("caller", "received", "tool", outcome.describe())
        return outcome

    async def computer_view(self, computer_id: str) -> dict[str, Any] | None:
        """The computer's row of GET /state (None when it is not listed)."""
        answer = await self.browser("GET", C.Route.STATE)
        value = answer.json()
        if answer.status != 200 or not isinstance(value, dict):
            self.depart(f"GET /state was answered {answer.describe()}")
        rows = value.get("computers") if isinstance(value.get("computers"), list) else []
        return next((r for r in rows if isinstance(r, dict) and r.get("id") == computer_id), None)

    async def online(self, computer_id: str) -> bool | None:
        row = await self.computer_view(computer_id)
        return None if row is None else row.get("online")

    async def close(self) -> None:
        for raw in self.agents:
            await raw.close()
        await self.browser_http.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.adapter.close(), 5)


class DshHubEnvironment:
    def __init__(
        self,
        target: Target,
        *,
        adapter: str,
        timings: dict[str, float],
        reference_args: list[str],
        state_dir: Path | None,
    ) -> None:
        self.target = target
        self.adapter_spec = adapter
        self.timings = timings
        self.reference_args = reference_args
        self.state_dir = state_dir
        self.runner: HubRunner | None = None
        self._base: Path | None = None
        self._access: HubAccess | None = None
        self._users: asyncio.Queue[str] | None = None
        # The target keeps a ws:// URL (the hub serves both); show the http:// one.
        self.description = target.describe().split(", ", 1)[1].replace(" at ws", " at http")
        self.details: dict[str, Any] = {
            "hub": self.description,
            "adapter": adapter,
            "timings": ", ".join(f"{k} {v:g}" for k, v in sorted(timings.items())),
        }
        if reference_args:
            self.details["reference hub flags"] = " ".join(reference_args)

    @property
    def access(self) -> HubAccess:
        assert self._access is not None
        return self._access

    def adapter_for(self, user: str) -> DshHubAdapter:
        return load_class(self.adapter_spec, "--adapter")(self.access, user)

    async def start(self) -> None:
        try:
            load_class(self.adapter_spec, "--adapter")
        except TargetError as exc:
            raise TargetUnavailable(f"{exc} (is its folder on PYTHONPATH?)") from None
        self._base = Path(tempfile.mkdtemp(prefix="tetherbed-conform-dsh-hub-"))
        hub = self.target.hub
        args = list(self.reference_args)
        if hub.is_reference:
            args = [
                "--dsh-heartbeat-ms",
                str(int(self.timings["heartbeat_ms"])),
                "--dsh-key-ttl-minutes",
                str(self.timings["key_ttl_minutes"]),
                *args,
            ]
        runner = HubRunner(
            hub,
            self.target.tls,
            self._base,
            users=USERS if hub.is_reference else ["alice"],
            options={"dsh": dict(self.timings)},
            reference_args=args,
        )
        try:
            if hub.is_reference:
                await asyncio.to_thread(_mint_tokens, runner)
            else:
                runner.prepare()
            await asyncio.to_thread(runner.start)
            self._access = runner.access()
        except TargetError as exc:
            if runner.process is not None:
                await asyncio.to_thread(runner.process.stop)
            raise TargetUnavailable(str(exc)) from None
        self.runner = runner
        if hub.startable and self.state_dir is None:
            self.state_dir = runner.state
        self.details["state folder"] = str(self.state_dir) if self.state_dir else "(not visible)"
        users = sorted(self.access.tokens.users())
        if not users:
            raise TargetUnavailable("the hub's tokens name no user")
        self._users = asyncio.Queue()
        for user in users:
            self._users.put_nowait(user)

    async def stop(self) -> None:
        if self.runner is not None and self.runner.process is not None:
            await asyncio.to_thread(self.runner.process.stop)
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)

    def applicable(self, case: Case) -> str | None:
        if "state" in case.needs and self.state_dir is None:
            return "the hub's storage is not visible (a hub at a URL: give --hub-state DIR)"
        if "short_keys" in case.needs and self.timings["key_ttl_minutes"] * 60 > 30:
            return "keys live longer than 30 s (--hub-option key_ttl_minutes=...)"
        return None

    @contextlib.asynccontextmanager
    async def context(
        self, case: Case, evidence: Evidence, profile: Profile
    ) -> AsyncIterator[DshHubContext]:
        assert self._users is not None
        user = await self._users.get()
        context = DshHubContext(case, evidence, profile, self, user)
        try:
            yield context
        finally:
            await context.close()
            self._users.put_nowait(user)


def _mint_tokens(runner: HubRunner) -> None:
    """Client tokens of the users of Tetherbed's own hub, written into its store
    before it starts (in this process: a `hub token create` per user costs a
    second each)."""
    from tetherbed.hub.store import HubStore

    runner.state.mkdir(parents=True, exist_ok=True)
    store = HubStore(runner.state)
    try:
        table = {(user, "client"): store.create_token(user, "client") for user in USERS}
    finally:
        store.close()
    runner._tokens = Tokens(table)  # what the runner's own prepare() sets
