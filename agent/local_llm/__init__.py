"""LOCAL_LLM_COMPLETION: the agent in front of an Ollama-compatible backend.

- `ollama.py`: Ollama's wire format as plain code (the request body, the
  NDJSON stream as events); no sockets.
- `transport.py`: how the agent reaches the backend (HTTP with aiohttp; the
  simulator supplies an in-process one).
- `service.py`: the rules: probe and advertise the models, one request in
  flight (LOCAL_LLM_BUSY), MODEL_NOT_AVAILABLE, LOCAL_LLM_FAILED, chunks
  with `finish_reason: null` until the final one, then the response.
"""

from tetherbed.agent.local_llm.service import LocalLlm, StreamAbandoned
from tetherbed.agent.local_llm.transport import BackendUnavailable, HttpOllama

__all__ = ["BackendUnavailable", "HttpOllama", "LocalLlm", "StreamAbandoned"]
