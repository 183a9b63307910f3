"""Clients of the Tetherbed hub: the session SDK (shaped like E2B's AsyncSandbox),
the machine-control client, and the admin client.

    from tetherbed.client import HubSandbox

The hub does not own its clients: they speak only its public API
(docs/hub-api.md), so they work against any deployment of it.
"""

from tetherbed.client.sandbox import HubSandbox

__all__ = ["HubSandbox"]
