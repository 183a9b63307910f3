"""The proxy's HTTP control server: Toxiproxy's API plus Tetherbed's fault endpoints."""

from __future__ import annotations

from aiohttp import web

from tetherbed.simulator.proxy import fault_api, toxiproxy_api
from tetherbed.simulator.proxy.addresses import format_address
from tetherbed.simulator.proxy.registry import ProxyRegistry

DEFAULT_API = ("127.0.0.1", 8474)  # Toxiproxy's port, so its clients find us


def build_app(registry: ProxyRegistry) -> web.Application:
    app = web.Application(middlewares=[toxiproxy_api.error_middleware])
    app[toxiproxy_api.REGISTRY] = registry
    toxiproxy_api.add_routes(app)
    fault_api.add_routes(app)
    return app


class ApiServer:
    """Serves `build_app(registry)` on HOST:PORT (port 0: any free port)."""

    def __init__(self, registry: ProxyRegistry, host: str, port: int) -> None:
        self._runner = web.AppRunner(build_app(registry), access_log=None)
        self._host = host
        self._port = port
        self.address = ""

    async def start(self) -> str:
        """Start listening; returns the bound HOST:PORT."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.address = format_address(host, port)
        return self.address

    async def stop(self) -> None:
        await self._runner.cleanup()
