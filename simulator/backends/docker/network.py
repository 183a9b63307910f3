"""The two Docker networks of one `docker` backend run, and its address plan.

Why two networks: a partition of both directions is `docker network
disconnect` of the agent's network namespace from the network the hub is on
(`NET`). The host must still reach the agent's fault proxy API while the
agent is cut off, so every agent namespace also sits on a control network
(`CTL`) that carries its published API port and nothing else: the hub is not
on it, and the proxy dials the hub by its alias `hub`, which only `NET`
resolves. Docker picks a container's gateway (and so where its published
ports live) from its networks in name order, so the control network's name
sorts first (`…-ctl` < `…-net`).

Why fixed addresses: after `docker network connect` an agent must come back
with the address it had, or the TCP connections that were open across the
partition could never resume (their segments name the old address), which is
what a real partition heals into. Docker assigns a chosen address only on a
network whose subnet was given explicitly, so the subnet is first allocated
by Docker (which knows the host's routes and the other networks), then the
network is created again with that subnet spelled out, and every container
on it gets an address from the plan below.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
from dataclasses import dataclass, field

import docker
from docker.types import IPAMConfig, IPAMPool
from testcontainers.core.network import Network

log = logging.getLogger("tetherbed.simulator.docker")

#: Label on every container and network of a run: `tetherbed.run=<run id>`.
RUN_LABEL = "tetherbed.run"
#: Offsets in the data subnet: .1 is Docker's gateway, the hub is .2, agents from .10.
HUB_OFFSET = 2
FIRST_AGENT_OFFSET = 10
_SUBNET_ATTEMPTS = 5


def new_run_id() -> str:
    """Unique across pytest-xdist workers, processes and runs of one process."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    parts = ["tb", worker, str(os.getpid()), secrets.token_hex(3)]
    return "-".join(part for part in parts if part)


@dataclass
class RunNetworks:
    run: str
    ctl: Network
    net: Network
    subnet: ipaddress.IPv4Network
    _next_agent: int = field(default=FIRST_AGENT_OFFSET)

    @property
    def hub_address(self) -> str:
        return str(self.subnet.network_address + HUB_OFFSET)

    def next_agent_address(self) -> str:
        offset = self._next_agent
        self._next_agent += 1
        if offset >= self.subnet.num_addresses - 1:
            raise RuntimeError(f"no address left in {self.subnet} for another agent")
        return str(self.subnet.network_address + offset)

    @classmethod
    def create(cls, client: docker.DockerClient, run: str) -> RunNetworks:
        labels = {RUN_LABEL: run}
        ctl = _network(f"{run}-ctl", {"driver": "bridge", "labels": labels})
        ctl.create()
        try:
            net, subnet = _pinned_network(client, f"{run}-net", labels)
        except BaseException:
            _remove(ctl)
            raise
        return cls(run, ctl, net, subnet)

    def remove(self) -> None:
        for network in (self.net, self.ctl):
            _remove(network)


def _network(name: str, options: dict) -> Network:
    network = Network(docker_network_kw=options)
    network.name = name  # testcontainers names networks with a bare uuid
    return network


def _pinned_network(
    client: docker.DockerClient, name: str, labels: dict[str, str]
) -> tuple[Network, ipaddress.IPv4Network]:
    """A network whose subnet is explicit (so addresses can be chosen) and free."""
    last_error: Exception | None = None
    for _ in range(_SUBNET_ATTEMPTS):
        probe = client.networks.create(name, driver="bridge", labels=labels)
        try:
            probe.reload()
            subnet = ipaddress.IPv4Network(probe.attrs["IPAM"]["Config"][0]["Subnet"])
        finally:
            probe.remove()
        ipam = IPAMConfig(
            pool_configs=[IPAMPool(subnet=str(subnet), gateway=str(subnet.network_address + 1))]
        )
        network = _network(name, {"driver": "bridge", "labels": labels, "ipam": ipam})
        try:
            network.create()
        except docker.errors.APIError as exc:  # another run took the subnet meanwhile
            if "overlap" not in str(exc).lower():
                raise
            last_error = exc
            continue
        return network, subnet
    raise RuntimeError(f"no free subnet for {name} after {_SUBNET_ATTEMPTS} tries: {last_error}")


def _remove(network: Network) -> None:
    try:
        network.remove()
    except Exception as exc:  # teardown goes on; the sweep retries
        log.debug("removing network %s: %s", network.name, exc)
