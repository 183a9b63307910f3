"""A topology driven step by step from ordinary (synchronous) test code.

The scenario runner executes a YAML file in one go; a `Testbed` gives a test
the same steps as method calls, on any backend:

    tb = Testbed(topology, backend="sim")
    tb.start("hub"); tb.start("laptop"); tb.expect(agent="laptop", state="connected")
    answer = tb.request("alice", "FILE_WRITE", {"path": "a.txt", "content": "x"})
    tb.pause("laptop"); tb.wait(40); ...
    assert all(v.ok for v in tb.check())

On the sim backend the virtual-time loop runs only inside these calls, so
time advances exactly as far as the test asks. On the process backend the
loop runs in a thread of its own, because the fault proxies must keep
forwarding between calls.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from tetherbed.simulator.backends.base import Backend, NodeState
from tetherbed.simulator.checkers import Verdict, run_checkers
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.runner import (
    DEFAULT_WITHIN,
    ScenarioRunner,
    backend_factory,
    checker_options,
)
from tetherbed.simulator.scenario import (
    DEFAULT_CHECKERS,
    AgentSpec,
    ClientSpec,
    HubSpec,
    Scenario,
    Step,
    Topology,
    check_step,
    check_topology,
)
from tetherbed.simulator.validation import Where

T = TypeVar("T")


class Testbed:
    __test__ = False  # not a pytest test class

    def __init__(
        self,
        topology: Topology,
        *,
        backend: str = "sim",
        seed: int = 1,
        workdir: Path,
        name: str = "testbed",
        checkers: tuple[str, ...] = DEFAULT_CHECKERS,
    ) -> None:
        self.scenario = Scenario(
            name=name,
            path=None,
            description="",
            seed=seed,
            topology=topology,
            steps=(),
            checkers=checkers,
            checker_options={},
            timeout=3600.0,
            backends=(backend,),
        )
        self.backend: Backend = backend_factory(backend)(self.scenario, workdir, seed)
        self._runner = ScenarioRunner(self.scenario, self.backend)
        self._steps = itertools.count(1)
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        loop = getattr(self.backend, "loop", None)
        if loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, daemon=True, name="testbed")
            self._thread.start()
        self._loop: asyncio.AbstractEventLoop = loop
        self._closed = False
        self._call(self._setup())

    async def _setup(self) -> None:
        await self.backend.setup()
        for spec in self.scenario.topology.clients.values():
            self._runner.add_client(spec)

    # --- running coroutines on the backend's loop ----------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._thread is None:
            asyncio.set_event_loop(self._loop)
            return self._loop.run_until_complete(coro)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _step(self, kind: str, args: Any = None) -> None:
        index = next(self._steps)
        where = Where(self.scenario.name).at_step(index, kind)
        args = check_step(kind, args, self.scenario.topology, self.backend.name, where)
        step = Step(index, kind, args)
        self._runner.begin_step(step)
        self._call(self._runner.run_step(step))

    # --- steps -----------------------------------------------------------------------

    def start(self, node: str) -> None:
        self._step("start", node)

    def stop(self, node: str) -> None:
        self._step("stop", node)

    def kill(self, node: str) -> None:
        self._step("kill", node)

    def restart(self, node: str) -> None:
        self._step("restart", node)

    def pause(self, node: str) -> None:
        self._step("pause", node)

    def resume(self, node: str) -> None:
        self._step("resume", node)

    def partition(self, agent: str, direction: str = "both") -> None:
        self._step("partition", {"agent": agent, "direction": direction})

    def heal(self, agent: str | None = None) -> None:
        self._step("heal", "all" if agent is None else {"agent": agent})

    def fault(self, agent: str, kind: str, **params: Any) -> None:
        self._step("fault", {"agent": agent, "kind": kind, **params})

    def clear(self, agent: str | None = None) -> None:
        self._step("clear", "all" if agent is None else {"agent": agent})

    def revoke(self, session: str) -> None:
        self._step("revoke", session)

    def wait(self, seconds: float) -> None:
        self._step("wait", seconds)

    def send(
        self, client: str, kind: str, payload: dict[str, Any], request_id: str | None = None
    ) -> str:
        """Send without waiting; returns the request id to `expect` on."""
        request_id = request_id or f"r{next(self._ids)}"
        self._step("send", {"client": client, "id": request_id, "type": kind, "payload": payload})
        return request_id

    # --- dsh-computers steps (SSE agents, dsh clients) --------------------------------

    def create_key(self, client: str, key: str, **options: Any) -> None:
        """A dsh client creates an enrollment key, named `key` for `enroll`."""
        self._step("create_key", {"client": client, "id": key, **options})

    def enroll(self, agent: str, key: str) -> None:
        """The SSE agent's `enroll` with the key named `key`."""
        self._step("enroll", {"agent": agent, "key": key})

    def exec(
        self,
        client: str,
        computer: str,
        command: str,
        request_id: str | None = None,
        **options: Any,
    ) -> str:
        """computer_exec through the model tools, without waiting; returns its id."""
        request_id = request_id or f"r{next(self._ids)}"
        args = {"client": client, "id": request_id, "computer": computer, "command": command}
        self._step("exec", {**args, **options})
        return request_id

    def rename_computer(self, client: str, computer: str, name: str) -> None:
        self._step("rename_computer", {"client": client, "computer": computer, "name": name})

    def delete_computer(self, client: str, computer: str) -> None:
        self._step("delete_computer", {"client": client, "computer": computer})

    def expect(self, **conditions: Any) -> None:
        """An expect step (same keys as in scenario files); raises StepFailed."""
        self._step("expect", conditions)

    def request(
        self, client: str, kind: str, payload: dict[str, Any], *, within: float = DEFAULT_WITHIN
    ) -> Record:
        """Send and wait for the completion record (ok, fail or info)."""
        return self._completion(client, self.send(client, kind, payload), within)

    def unplug(self, agent: str, port: str) -> None:
        """The device on the agent's virtual serial port `port` goes away."""
        self._step("unplug", {"agent": agent, "port": port})

    def plug(self, agent: str, port: str) -> None:
        self._step("plug", {"agent": agent, "port": port})

    def serial(
        self, client: str, kind: str, port: str, *, within: float = DEFAULT_WITHIN, **fields: Any
    ) -> Record:
        """A SERIAL_* request on a declared port (`kind`: open, write, read,
        close; `fields` as the `serial_KIND` step takes them), and its completion."""
        request_id = f"r{next(self._ids)}"
        self._step(f"serial_{kind}", {"client": client, "id": request_id, "port": port, **fields})
        return self._completion(client, request_id, within)

    def _completion(self, client: str, request_id: str, within: float) -> Record:
        self.expect(client=client, id=request_id, within=within)
        process = f"client:{client}"
        record = self.backend.recorder.find(
            lambda r: r.process == process and r.req == request_id and r.type != "invoke"
        )
        assert record is not None
        return record

    # --- adding nodes ------------------------------------------------------------------

    def add_agent(self, spec: AgentSpec) -> None:
        self._call(self.backend.add_agent(spec))

    def add_client(self, spec: ClientSpec) -> None:
        self.scenario.topology.clients[spec.name] = spec
        self._runner.add_client(spec)

    # --- looking -----------------------------------------------------------------------

    def state(self, node: str) -> NodeState:
        return self.backend.state(node)

    def root(self, agent: str) -> Path:
        return self.backend.agent_root(self.scenario.topology.agents[agent])

    @property
    def history(self) -> History:
        return History.merged(self.backend.recorder.history)

    @property
    def url(self) -> str | None:
        """The hub's URL on the process backend (None on sim)."""
        return getattr(self.backend, "hub_url", None)

    def check(self, names: list[str] | None = None) -> list[Verdict]:
        """Record the final files, then run the checkers over the history so far."""
        self._runner.record_final_files()
        return run_checkers(
            self.history, names or list(self.scenario.checkers), checker_options(self.scenario)
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._runner.close())
        finally:
            if self._thread is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(10)
            else:  # the sim's loop: end what its seeded scheduler still held back
                getattr(self.backend, "cancel_leftovers", lambda: None)()
            self._loop.close()


def topology(
    hub: dict[str, Any] | None = None,
    agents: dict[str, dict[str, Any]] | None = None,
    clients: dict[str, dict[str, Any]] | None = None,
) -> Topology:
    """A topology from plain dicts, the same shape (and checks) as in scenario files."""
    return check_topology(
        {"hub": {"options": hub or {}}, "agents": agents or {}, "clients": clients or {}},
        Where("topology()"),
    )


__all__ = ["HubSpec", "Testbed", "topology"]
