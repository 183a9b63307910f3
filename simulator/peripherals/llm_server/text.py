"""The server's "model": deterministic tokens from a seed and the prompt.

The same seed, model and messages always give the same tokens, so a scenario
can expect exact content. A last user message `echo: TEXT` is answered with
TEXT itself, split into word tokens (each token is a word with the space
before it), which lets a test choose the answer.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any

_SOURCE = (
    "the agent relays each request through the hub to a machine that dials out "
    "so no port is open and every answer comes back under the same id while the "
    "platform keeps one owner per session and retries only what is safe to run "
    "twice a local model streams tokens one by one until it stops or reaches its "
    "limit and the shim assembles them into one response with token counts"
)
_WORDS = tuple(_SOURCE.split())

ECHO_PREFIX = "echo:"


def prompt_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Tokens the prompt costs: words, plus a few per message for the template."""
    return sum(len(str(m.get("content", "")).split()) + 4 for m in messages)


def generate(
    seed: int, model: str, messages: Sequence[dict[str, Any]], limit: int, longest: int
) -> tuple[list[str], bool]:
    """The tokens of one answer and whether `limit` cut it (done_reason "length").

    `limit` is the most tokens the caller wants (num_predict); an answer the
    model chooses itself is between 4 and `longest` tokens.
    """
    last_user = next(
        (str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    if last_user.startswith(ECHO_PREFIX):
        words = last_user[len(ECHO_PREFIX) :].split()
        tokens = [w if i == 0 else " " + w for i, w in enumerate(words)]
        return tokens[:limit], len(tokens) > limit
    key = json.dumps([seed, model, list(messages)], sort_keys=True, default=str)
    rng = random.Random(hashlib.sha256(key.encode()).digest())
    length = rng.randint(min(4, longest), longest)
    tokens: list[str] = []
    for i in range(length):
        word = rng.choice(_WORDS)
        tokens.append(word.capitalize() if i == 0 else " " + word)
    tokens[-1] += "."
    return tokens[:limit], length > limit
