"""The version this agent reports as `agentVersion`.

It implements dsh-computers 1.3.0 and says so first, with Tetherbed's own
version as semver build metadata ("1.3.0+tetherbed.0.1.0"): a hub compares
the part before "+" (drift, minAgentVersion) and a person sees which agent
it is.
"""

from __future__ import annotations

from tetherbed import __version__ as TETHERBED_VERSION
from tetherbed.wire.dsh.constants import SPEC_VERSION

AGENT_VERSION = f"{SPEC_VERSION}+tetherbed.{TETHERBED_VERSION}"
