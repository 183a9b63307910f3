"""Faults on one agent's link in the `docker` backend.

Two tools, each used where it is the real thing:

- `ProxyApi`: the agent's own `tetherbed proxy`, driven over its published
  Toxiproxy-compatible HTTP API. It does what only a proxy that reads
  WebSocket frames can do (drop, delay, duplicate or reorder messages by type,
  swallow PONGs, inject a close code) and the TCP toxics (bandwidth, slicer,
  limit_data, blackhole, reset): `apply_plan` carries out the operations
  `simulator/faults.py` plans for every backend, so these faults mean exactly
  the same here as on the process and sim backends. One-way partitions are the proxy's
  `hold` partitions too: an IP-level one-way drop would also drop the TCP
  acknowledgements of the other direction and stall it, which is not a
  one-way partition of the agent's messages.
- `LinkShaper`: the kernel of the agent's network namespace, through
  `docker exec` as root (the namespace's container has NET_ADMIN). `latency`
  is `tc netem` on the interface toward the hub (egress for `to_hub`, ingress
  through an ifb device for `from_hub`) when the kernel has netem; kernels
  built without it (CONFIG_NET_SCH_NETEM unset) get the proxy's latency toxic
  instead, which is what the process backend uses anyway. `loss` (percent,
  docker only) is random packet loss by iptables' `statistic` match, which
  every kernel with iptables has; TCP retransmits what it loses, as it would
  on a lossy Wi-Fi.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from tetherbed.simulator.backends.base import BackendError
from tetherbed.simulator.faults import (
    AddRule,
    AddToxic,
    FaultOp,
    InjectClose,
    ResetConnections,
)

#: The proxy's name inside the agent's `tetherbed proxy` (`--proxy link=...`).
PROXY_NAME = "link"

#: Runs a shell script as root in the agent's network namespace: (exit code, output).
ExecRoot = Callable[[str], Awaitable[tuple[int, str]]]


class ProxyApi:
    """One agent's fault proxy, over HTTP from the host."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str) -> None:
        self.http = http
        self.base_url = base_url

    async def call(
        self, method: str, path: str, body: Any = None, *, missing_ok: bool = False
    ) -> Any:
        url = f"{self.base_url}/proxies/{PROXY_NAME}{path}"
        try:
            async with self.http.request(
                method, url, json=body, timeout=aiohttp.ClientTimeout(total=10)
            ) as response:
                text = await response.text()
                if response.status == 404 and missing_ok:
                    return None
                if response.status >= 400:
                    raise BackendError(f"fault proxy: {method} {path}: {response.status} {text}")
                return await response.json(content_type=None) if text else None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise BackendError(f"fault proxy at {self.base_url}: {method} {path}: {exc}") from exc

    async def wait_ready(self, timeout: float, alive: Callable[[], str | None]) -> None:
        """Poll `GET /version` until it answers; `alive()` names why to give up early."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                async with self.http.get(
                    f"{self.base_url}/version", timeout=aiohttp.ClientTimeout(total=1)
                ) as response:
                    if response.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            problem = alive()
            if problem or time.monotonic() > deadline:
                raise BackendError(problem or f"the fault proxy did not answer within {timeout} s")
            await asyncio.sleep(0.03)

    async def partition(self, stream: str) -> None:
        await self.call("POST", "/partition", {"stream": stream, "mode": "hold"})

    async def heal(self) -> None:
        await self.call("DELETE", "/partition?stream=both")

    async def clear(self) -> None:
        """Every toxic and message rule goes; partitions stay."""
        for toxic in await self.call("GET", "/toxics") or []:
            await self.call("DELETE", f"/toxics/{toxic['name']}")
        for rule in await self.call("GET", "/ws/rules") or []:
            await self.call("DELETE", f"/ws/rules/{rule['name']}")


async def apply_plan(api: ProxyApi, ops: list[FaultOp]) -> None:
    """Carry out a fault's proxy operations (`simulator/faults.py`) over the HTTP API."""
    for op in ops:
        match op:
            case AddToxic(toxic):
                await api.call("DELETE", f"/toxics/{toxic.name}", missing_ok=True)
                await api.call("POST", "/toxics", toxic.to_json())
            case AddRule(rule):
                await api.call("POST", "/ws/rules", dict(rule))
            case ResetConnections():
                await api.call("POST", "/connections/reset")
            case InjectClose(toward, code, reason):
                await api.call(
                    "POST", "/ws/close", {"toward": toward, "code": code, "reason": reason}
                )
            case _:
                raise BackendError(f"the fault proxy cannot carry out {op}")


# The interface that carries the agent's address (it is re-created, with a new
# name, each time a partition heals).
_DEVICE = """dev=$(ip -o -4 addr show | awk -v a="{address}/" 'index($4, a) == 1 {{print $2}}')
[ -n "$dev" ] || {{ echo "no interface has {address} (partitioned?)"; exit 3; }}
"""
_NETEM_EGRESS = "tc qdisc replace dev $dev root netem delay {delay}ms {jitter}ms\n"
_NETEM_INGRESS = """ip link show ifb0 >/dev/null 2>&1 || ip link add ifb0 type ifb
ip link set ifb0 up
tc qdisc replace dev ifb0 root netem delay {delay}ms {jitter}ms
tc qdisc replace dev $dev handle ffff: ingress
tc filter replace dev $dev parent ffff: protocol all prio 1 u32 match u32 0 0 \\
    action mirred egress redirect dev ifb0
"""
_UNSHAPE = """tc qdisc del dev $dev root 2>/dev/null
tc qdisc del dev $dev ingress 2>/dev/null
ip link del ifb0 2>/dev/null
true
"""
_LOSS_CHAINS = """for chain in TETHERBED_OUT:OUTPUT TETHERBED_IN:INPUT; do
    name=${chain%:*} hook=${chain#*:}
    iptables -N $name 2>/dev/null && iptables -I $hook -j $name
done
"""


class LinkShaper:
    """netem and iptables in one agent's network namespace."""

    def __init__(self, exec_root: ExecRoot, address: str, hub_address: str) -> None:
        self.exec_root = exec_root
        self.address = address
        self.hub_address = hub_address
        #: The netem delay in force ({direction, latency_ms, jitter_ms}), re-applied on heal.
        self.netem: dict[str, Any] | None = None
        self.lossy = False

    async def _run(self, script: str) -> str:
        code, output = await self.exec_root(script)
        if code != 0:
            raise _ShellFailed(code, output)
        return output

    async def delay(self, params: dict[str, Any]) -> bool:
        """netem delay toward and/or from the hub; False when the kernel has no netem."""
        direction = params.get("direction", "both")
        values = {
            "delay": int(params.get("latency_ms", 0)),
            "jitter": int(params.get("jitter_ms", 0)),
        }
        script = _DEVICE.format(address=self.address)
        if direction in ("both", "to_hub"):
            script += _NETEM_EGRESS.format(**values)
        if direction in ("both", "from_hub"):
            script += _NETEM_INGRESS.format(**values)
        try:
            await self._run("set -e\n" + script)
        except _ShellFailed as failed:
            if "unknown" in failed.output.lower():  # "Specified qdisc kind is unknown."
                await self.exec_root(_DEVICE.format(address=self.address) + _UNSHAPE)
                return False
            if failed.code == 3:  # partitioned: applied when the link is back
                self.netem = dict(params)
                return True
            raise BackendError(f"tc netem failed ({failed.code}): {failed.output}") from None
        self.netem = dict(params)
        return True

    async def reapply(self) -> None:
        """After a heal the interface is new: put its netem delay back."""
        if self.netem is not None:
            await self.delay(self.netem)

    async def loss(self, percent: float, direction: str) -> None:
        probability = f"{percent / 100:.4f}"
        script = "set -e\n" + _LOSS_CHAINS
        statistic = f"-m statistic --mode random --probability {probability} -j DROP"
        if direction in ("both", "to_hub"):
            script += f"iptables -A TETHERBED_OUT -d {self.hub_address} {statistic}\n"
        if direction in ("both", "from_hub"):
            script += f"iptables -A TETHERBED_IN -s {self.hub_address} {statistic}\n"
        try:
            await self._run(script)
        except _ShellFailed as failed:
            raise BackendError(f"iptables failed ({failed.code}): {failed.output}") from None
        self.lossy = True

    async def clear(self) -> None:
        if self.netem is not None:
            self.netem = None
            await self.exec_root(_DEVICE.format(address=self.address) + _UNSHAPE)
        if self.lossy:
            self.lossy = False
            await self.exec_root("iptables -F TETHERBED_OUT; iptables -F TETHERBED_IN")


class _ShellFailed(Exception):
    def __init__(self, code: int, output: str) -> None:
        super().__init__(f"exit {code}: {output}")
        self.code = code
        self.output = output
