"""The one error a target description can raise: it names what is wrong."""

from __future__ import annotations


class TargetError(ValueError):
    """A target (agent command, hub, adapters, TLS) that cannot be used as given."""
