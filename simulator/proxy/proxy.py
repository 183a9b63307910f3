"""A fault proxy: one listening address forwarding to one upstream, with its faults.

This is the object API; the HTTP API (`toxiproxy_api.py`, `fault_api.py`) is a
thin layer over it. Everything may change while connections are open: toxics,
partitions and message rules apply to current and future connections alike.

    proxy = await registry.create("hub", "127.0.0.1:0", "127.0.0.1:8765")
    proxy.add_toxic("latency", stream="upstream", latency=200, jitter=20)
    proxy.partition("both", mode="hold"); ...; proxy.heal()
    proxy.add_rule("drop", stream="upstream", type="PONG")   # swallow PONGs
    proxy.inject_close("client", 4429, "rate limited")
    proxy.reset_connections()                                # RST everything
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.addresses import format_address, parse_address
from tetherbed.simulator.proxy.connection import ProxiedConnection
from tetherbed.simulator.proxy.http.replay import replay_request
from tetherbed.simulator.proxy.http.rules import HttpRule, HttpRuleBook
from tetherbed.simulator.proxy.partition import Partition, Partitions
from tetherbed.simulator.proxy.scheduler.driver import FrameScheduler
from tetherbed.simulator.proxy.streams import Stream, select_streams
from tetherbed.simulator.proxy.toxics import Toxic
from tetherbed.simulator.proxy.ws.rules import MessageRule, RuleBook, check_close
from tetherbed.simulator.wiretap.log import WireLog

log = logging.getLogger(__name__)
STOP_GRACE = 5.0


class FaultProxy:
    def __init__(
        self,
        name: str,
        listen: str,
        upstream: str,
        *,
        rng: random.Random | None = None,
        websocket: bool = True,
        strip_extensions: bool = True,
        close_timeout: float = 2.0,
        wire: WireLog | None = None,
        wire_clock: Callable[[], float] = time.monotonic,
        listen_ssl: ssl.SSLContext | None = None,
        upstream_ssl: ssl.SSLContext | None = None,
        upstream_hostname: str | None = None,
        http: bool = False,
        scheduler: FrameScheduler | None = None,
        schedule_link: str | None = None,
    ) -> None:
        """`rng` drives every random choice (toxicity, jitter, slice sizes); seed it
        to reproduce them. `websocket` turns on frame parsing after an HTTP upgrade;
        `strip_extensions` keeps permessage-deflate from being negotiated so that
        message rules can read and drop messages (see `ws_handshake`).

        `wire` records what crosses, seen from the connecting side, with times
        from `wire_clock` (the wire recorder, `simulator/wiretap`). `listen_ssl`
        terminates TLS toward the connecting side; `upstream_ssl` originates TLS
        toward the upstream (verifying `upstream_hostname`): with both, the
        proxy reads and records a `wss://` link; with only the second, the
        connecting side speaks plain `ws://` to the proxy.

        `http` reads every connection as HTTP/1.1 instead (an SSE agent's
        link), so that HTTP rules (`add_http_rule`) can drop or replay whole
        requests and responses.

        `scheduler` (shared by the proxies of a run) holds every WebSocket
        message and releases it in its seeded or replayed order
        (`proxy/scheduler/`); None forwards at once. `schedule_link` names this
        proxy's frames in the decision log (default: its name)."""
        self.name = name
        self._listen = parse_address(listen, "listen")
        self.upstream_address = parse_address(upstream, "upstream")
        self.enabled = False
        self.websocket = websocket
        self.strip_extensions = strip_extensions
        self.close_timeout = close_timeout
        self.wire = wire
        self.wire_clock = wire_clock
        self.listen_ssl = listen_ssl
        self.upstream_ssl = upstream_ssl
        self.upstream_hostname = upstream_hostname
        self.partitions = Partitions()
        self.rules = RuleBook()
        self.http = http
        self.scheduler = scheduler
        self.schedule_link = schedule_link or name
        self.http_rules = HttpRuleBook()
        self._rng = rng if rng is not None else random.Random()
        self._toxics: list[Toxic] = []
        self._server: asyncio.Server | None = None
        self._connections: set[ProxiedConnection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- addresses and lifecycle ----------------------------------------------

    @property
    def listen(self) -> str:
        """The listening address; after a start on port 0, the port actually bound."""
        return format_address(*self._listen)

    @property
    def upstream(self) -> str:
        return format_address(*self.upstream_address)

    async def start(self) -> None:
        """Listen (again). The port of a first start on port 0 is kept for restarts."""
        if self._server is not None:
            self.enabled = True
            return
        host, port = self._listen
        try:
            self._server = await asyncio.start_server(self._accept, host, port, ssl=self.listen_ssl)
        except OSError as exc:
            message = f"proxy {self.name} cannot listen on {self.listen}: {exc}"
            raise errors.ProxyError(message) from exc
        bound = self._server.sockets[0].getsockname()
        self._listen = (host, bound[1])
        self.enabled = True

    async def stop(self) -> None:
        """Stop listening (new connections are refused) and cut every connection (FIN)."""
        self.enabled = False
        if self._server is not None:
            self._server.close()
            self._server = None
        for connection in list(self._connections):
            connection.close()
        tasks = [task for task in self._tasks if task is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_GRACE)

    async def set_enabled(self, enabled: bool) -> None:
        """Toxiproxy's `enabled`: false takes the proxy down, true brings it back."""
        if enabled and not self.enabled:
            await self.start()
        elif not enabled and self.enabled:
            await self.stop()

    async def update(
        self, *, listen: str | None = None, upstream: str | None = None, enabled: bool | None = None
    ) -> None:
        """Change fields; a new listen or upstream address restarts the proxy."""
        new_listen = parse_address(listen, "listen") if listen is not None else self._listen
        new_upstream = (
            parse_address(upstream, "upstream") if upstream is not None else self.upstream_address
        )
        want_enabled = self.enabled if enabled is None else enabled
        if new_listen != self._listen or new_upstream != self.upstream_address:
            was_enabled = self.enabled
            await self.stop()
            self._listen, self.upstream_address = new_listen, new_upstream
            if was_enabled and want_enabled:
                await self.start()
        await self.set_enabled(want_enabled)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.enabled:
            writer.close()
            return
        # Each connection gets its own generator, seeded from the proxy's, so its
        # choices do not depend on how other connections' traffic interleaves.
        rng = random.Random(self._rng.getrandbits(64))
        connection = ProxiedConnection(self, reader, writer, rng)
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(connection)
        self._tasks.add(task)
        try:
            await connection.run()
        except Exception:
            log.exception("%s: connection from %s failed", self.name, connection.client)
        finally:
            self._connections.discard(connection)
            self._tasks.discard(task)

    # -- toxics ---------------------------------------------------------------

    @property
    def toxics(self) -> list[Toxic]:
        return list(self._toxics)

    def toxics_for(self, stream: Stream) -> list[Toxic]:
        return [toxic for toxic in self._toxics if toxic.stream == stream]

    def toxic(self, name: str) -> Toxic:
        for toxic in self._toxics:
            if toxic.name == name:
                return toxic
        raise errors.toxic_not_found(name)

    def add_toxic(self, toxic: Toxic | Mapping[str, Any] | str, **options: Any) -> Toxic:
        """Add a toxic: a `Toxic`, a Toxiproxy JSON body, or a type with keywords,
        e.g. `add_toxic("latency", stream="upstream", latency=100, jitter=10)`."""
        if isinstance(toxic, str):
            toxic = Toxic.create(toxic, **options)
        elif not isinstance(toxic, Toxic):
            toxic = Toxic.from_json(toxic)
        if any(existing.name == toxic.name for existing in self._toxics):
            raise errors.toxic_exists(toxic.name)
        self._toxics.append(toxic)
        self._toxics_changed()
        return toxic

    def update_toxic(
        self, name: str, body: Mapping[str, Any] | None = None, **attributes: int
    ) -> Toxic:
        """Change a toxic's toxicity and attributes: `update_toxic("latency_downstream",
        latency=50)` or with a Toxiproxy JSON body `{"toxicity": 0.5, "attributes": {...}}`."""
        current = self.toxic(name)
        changes: dict[str, Any] = dict(body or {})
        if attributes:
            changes["attributes"] = {**(changes.get("attributes") or {}), **attributes}
        replacement = current.updated(changes)
        self._toxics[self._toxics.index(current)] = replacement
        self._toxics_changed()
        return replacement

    def remove_toxic(self, name: str) -> None:
        self._toxics.remove(self.toxic(name))
        self._toxics_changed()

    def clear_toxics(self) -> None:
        self._toxics.clear()
        self._toxics_changed()

    def blackhole(self, stream: str = "both") -> list[Toxic]:
        """Drop all data in `stream` while keeping connections open (a `timeout` 0 toxic)."""
        return [
            self.add_toxic("timeout", name=f"blackhole_{direction}", stream=direction, timeout=0)
            for direction in _streams(stream)
        ]

    def _toxics_changed(self) -> None:
        for connection in list(self._connections):
            connection.toxics_changed()

    # -- partitions and resets ------------------------------------------------

    def partition(self, stream: str = "both", mode: str = "hold", timeout: int = 0) -> Partition:
        """Cut `stream` (upstream, downstream or both); see `partition.py` for modes."""
        partition = Partition(mode, timeout)  # type: ignore[arg-type]
        self.partitions.cut(stream, partition)
        self._partitions_changed()
        return partition

    def heal(self, stream: str = "both") -> None:
        self.partitions.heal(stream)
        self._partitions_changed()

    def _partitions_changed(self) -> None:
        for connection in list(self._connections):
            connection.partition_changed()

    def reset_connections(self) -> int:
        """Reset (RST) every current connection, both sides; returns how many."""
        connections = list(self._connections)
        for connection in connections:
            connection.reset()
        return len(connections)

    # -- WebSocket message faults ---------------------------------------------

    def add_rule(self, rule: MessageRule | Mapping[str, Any] | str, **options: Any) -> MessageRule:
        """Add a message rule: a `MessageRule`, its JSON, or an action with keywords,
        e.g. `add_rule("delay", stream="downstream", type="FILE_CONTENTS", delay=2000)`."""
        if isinstance(rule, str):
            rule = MessageRule(rule, **options)  # type: ignore[arg-type]
        elif not isinstance(rule, MessageRule):
            rule = MessageRule.from_json(rule)
        return self.rules.add(rule)

    def remove_rule(self, name: str) -> None:
        self.rules.remove(name)

    # -- HTTP faults (an `http` proxy) -----------------------------------------

    def add_http_rule(self, rule: HttpRule | Mapping[str, Any]) -> HttpRule:
        """Add an HTTP rule, e.g. `add_http_rule({"action": "drop_response",
        "path": "/agent/results", "count": 1})` (see `http/rules.py`)."""
        if not self.http:
            raise errors.BadRequest(f"proxy {self.name} does not read HTTP (create it with http)")
        return self.http_rules.add(rule)

    def replay(self, data: bytes, delay: float) -> None:
        """Send a copy of a request to the upstream `delay` seconds from now, on a
        connection of its own, and read its answer into the void."""

        def start() -> None:
            host, port = self.upstream_address
            hostname = self.upstream_hostname if self.upstream_ssl is not None else None
            task = asyncio.ensure_future(
                replay_request(
                    lambda: asyncio.open_connection(
                        host, port, ssl=self.upstream_ssl, server_hostname=hostname
                    ),
                    data,
                )
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        asyncio.get_running_loop().call_later(delay, start)

    def inject_close(self, toward: str = "client", code: int = 1000, reason: str = "") -> int:
        """Send a Close frame toward `client`, `server` or `both` on every open
        WebSocket (see `WsSession.inject_close`); returns how many were affected."""
        check_close(toward, code)
        return sum(
            connection.inject_close(toward, code, reason) for connection in list(self._connections)
        )

    # -- the whole --------------------------------------------------------------

    def reset_faults(self) -> None:
        """Remove every toxic and rule and heal every partition (part of POST /reset)."""
        self.rules.clear()
        self.http_rules.clear()
        self.partitions.heal("both")
        self._partitions_changed()
        self.clear_toxics()

    def connections(self) -> list[dict[str, Any]]:
        return [connection.describe() for connection in list(self._connections)]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [toxic.to_json() for toxic in self._toxics],
        }


def _streams(selector: str) -> tuple[Stream, ...]:
    try:
        return select_streams(selector)
    except ValueError as exc:
        raise errors.BadRequest(str(exc)) from None
