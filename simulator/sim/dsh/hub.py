"""The reference hub's dsh-computers routes on the sim network.

Not a model of the hub: its real aiohttp application with the real
`DshServer` (enrollment, presence, SSE streams, results, the browser API and
the model tools), fed bytes by `SimTcp` instead of sockets, on the virtual
clock and a seeded entropy source, so a seed replays its keys and ids too.
"""

from __future__ import annotations

import asyncio
import random

from aiohttp import web

from tetherbed.hub.dsh.config import DshConfig
from tetherbed.hub.dsh.server import DshServer
from tetherbed.hub.store import HubStore
from tetherbed.runtime.clock import Clock
from tetherbed.simulator.sim.tcp import SimTcp


class SimDshHub:
    def __init__(
        self,
        tcp: SimTcp,
        store: HubStore,
        config: DshConfig,
        clock: Clock,
        rng: random.Random,
        *,
        keepalive_timeout: float,
    ) -> None:
        self.tcp = tcp
        self.app = web.Application()
        self.server = DshServer(store, config, clock=clock, entropy=rng.randbytes)
        self.server.mount(self.app)
        self.runner = web.AppRunner(
            self.app, handle_signals=False, access_log=None, keepalive_timeout=keepalive_timeout
        )
        self._cleaning: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.runner.setup()
        server = self.runner.server
        assert server is not None
        self.tcp.listen(server)

    async def shutdown(self) -> None:
        """Graceful: every stream is ended, then the connections are closed."""
        self.tcp.stop_listening()
        await self._cleanup()

    def crash(self) -> None:
        """Abrupt: every connection is reset first, so the streams the clean-up
        then ends write nothing more; the handlers left waiting finish."""
        self.tcp.crash()
        self._cleanup()

    async def closed(self) -> None:
        """Until the application is cleaned up (after `crash` or `shutdown`)."""
        await self._cleanup()

    def _cleanup(self) -> asyncio.Task[None]:
        if self._cleaning is None:
            self._cleaning = asyncio.ensure_future(self.runner.cleanup())
        return self._cleaning
