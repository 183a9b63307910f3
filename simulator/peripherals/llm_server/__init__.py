"""An Ollama-compatible LLM server for the test bed (`tetherbed llm-server`).

A real Ollama cannot run here (no model weights), so the bed ships a server
that speaks Ollama's HTTP API — `/api/tags`, `/api/chat` and `/api/generate`
with streaming NDJSON, `/api/show`, `/api/ps`, `/api/version` — with
deterministic output from a seed, configurable latency, token rate and
failures, and requests served one at a time as Ollama does by default. The
official `ollama` Python client works against it unchanged.

- `config.py`: what can be configured (models, seed, timing, failures).
- `text.py`: the deterministic "model": tokens from a seed and the prompt.
- `core.py`: the sans-I/O core: a request in, a reply or a timed plan of
  NDJSON lines out. No sockets, no clock of its own.
- `runner.py`: plays a plan on asyncio (the slots that serialise requests,
  the sleeps between tokens): real time over HTTP, virtual time on sim.
- `server.py`: the aiohttp driver and `tetherbed llm-server`.
- `in_process.py`: the same core and runner as an agent's Ollama transport,
  for the sim backend, where no socket may exist.
"""

from tetherbed.simulator.peripherals.llm_server.config import LlmServerConfig
from tetherbed.simulator.peripherals.llm_server.core import LlmServerCore

__all__ = ["LlmServerConfig", "LlmServerCore"]
