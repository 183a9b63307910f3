"""What a case puts on the agent's machine: a local LLM backend, a serial device.

- `LlmBackend`: `tetherbed llm-server`'s application (Ollama's HTTP API,
  deterministic answers) on an ephemeral loopback port in the suite's own
  process, configured per case (slow, failing, a model gone) and stopped when
  the case ends — or earlier, when a case wants a backend that went away.
  The agent reaches it through `{ollama_url}` (docs/targets.md).
- `serial_device`: a socat pty pair with the simulated device on its far end
  (simulator/peripherals/serial_ports.py), through `{serial_ports}`.

Neither is evidence: a case judges only what the agent sends its platform.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.peripherals.llm_server.config import LlmServerConfig
from tetherbed.simulator.peripherals.llm_server.server import build_app
from tetherbed.simulator.peripherals.serial_ports import VirtualSerialPort


class LlmBackend:
    """An Ollama-compatible server for one case."""

    def __init__(self, config: LlmServerConfig) -> None:
        self.config = config
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        self._runner = web.AppRunner(build_app(self.config), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # the bound socket: port 0 was asked
        assert server is not None
        host, port = server.sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        """Stop listening (connections in progress end): the backend is down."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


async def llm_backend(ctx: AgentContext, **options: Any) -> LlmBackend:
    """A started backend (`options` as LlmServerConfig's fields), stopped with the case."""
    backend = LlmBackend(LlmServerConfig.from_mapping(options))
    await backend.start()
    ctx.cleanups.append(backend.stop)
    ctx.evidence.note("llm-server", f"an Ollama-compatible backend at {backend.url} ({options})")
    return backend


async def serial_device(ctx: AgentContext, name: str = "ttyCF0") -> VirtualSerialPort:
    """A virtual serial port with the simulated line-protocol device on its far end."""
    folder = ctx.workspace.base / "serial"
    try:
        port = await asyncio.to_thread(VirtualSerialPort.start, folder, name)
    except RuntimeError as exc:  # no socat here: the bed cannot make the port
        ctx.not_applicable(f"cannot make a virtual serial port here: {exc}")

    async def stop() -> None:
        await asyncio.to_thread(port.stop)

    ctx.cleanups.append(stop)
    ctx.evidence.note("serial", f"a simulated device behind {port.client_end}")
    return port
