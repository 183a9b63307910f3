"""All the proxies one process hosts, by name (Toxiproxy's "proxy collection").

The registry owns the seeded random source: each proxy gets a generator seeded
from it at creation, so `ProxyRegistry(random.Random(7))` followed by the same
calls reproduces the same jitter, toxicity draws and slice sizes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.proxy import FaultProxy

DEFAULT_LISTEN = "127.0.0.1:0"


class ProxyRegistry:
    def __init__(self, rng: random.Random | None = None, **proxy_options: Any) -> None:
        """`proxy_options` are passed to every `FaultProxy` (e.g. `close_timeout`)."""
        self._rng = rng if rng is not None else random.Random()
        self._options = proxy_options
        self._proxies: dict[str, FaultProxy] = {}

    def __iter__(self) -> Iterator[FaultProxy]:
        return iter(list(self._proxies.values()))

    def __len__(self) -> int:
        return len(self._proxies)

    def get(self, name: str) -> FaultProxy:
        try:
            return self._proxies[name]
        except KeyError:
            raise errors.proxy_not_found(name) from None

    async def create(
        self,
        name: str,
        listen: str = DEFAULT_LISTEN,
        upstream: str = "",
        *,
        enabled: bool = True,
        **options: Any,
    ) -> FaultProxy:
        if not name:
            raise errors.missing_field("name")
        if not upstream:
            raise errors.missing_field("upstream")
        if name in self._proxies:
            raise errors.proxy_exists(name)
        seed = self._rng.getrandbits(64)
        proxy = FaultProxy(
            name, listen or DEFAULT_LISTEN, upstream, rng=random.Random(seed),
            **{**self._options, **options},
        )  # fmt: skip
        if enabled:
            await proxy.start()
        self._proxies[name] = proxy
        return proxy

    async def create_json(self, body: object) -> FaultProxy:
        """Create from Toxiproxy's JSON body: {name, listen, upstream, enabled}."""
        if not isinstance(body, Mapping):
            raise errors.bad_body("a proxy is a JSON object")
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            raise errors.bad_body("enabled must be true or false")
        return await self.create(
            _text(body, "name"), _text(body, "listen"), _text(body, "upstream"), enabled=enabled
        )

    async def remove(self, name: str) -> None:
        proxy = self.get(name)
        del self._proxies[name]
        await proxy.stop()

    async def reset(self) -> None:
        """Toxiproxy's POST /reset: enable every proxy, remove every toxic; Tetherbed
        also heals partitions and removes message rules."""
        for proxy in self:
            await proxy.start()
            proxy.reset_faults()

    async def populate(self, bodies: Sequence[object]) -> list[FaultProxy]:
        """Make these proxies exist; one whose listen or upstream differs is replaced."""
        result = []
        for body in bodies:
            if not isinstance(body, Mapping):
                raise errors.bad_body("populate takes a JSON array of proxies")
            name = _text(body, "name")
            existing = self._proxies.get(name)
            if existing is not None:
                if (existing.listen, existing.upstream) == (
                    _text(body, "listen"),
                    _text(body, "upstream"),
                ):
                    result.append(existing)
                    continue
                await self.remove(name)
            result.append(await self.create_json(body))
        return result

    async def close(self) -> None:
        for name in list(self._proxies):
            await self.remove(name)


def _text(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key, "")
    if not isinstance(value, str):
        raise errors.bad_body(f"{key} must be a string")
    return value
