"""What `tetherbed llm-server` can be told: models, seed, timing, failures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

#: The models the server lists when none are given (the spec's HELLO example).
DEFAULT_MODELS = ("llama3.2:3b", "mistral:7b")

#: How a failing request fails:
#: - `error`: HTTP 500 with `{"error": ...}` before any token (a runner that
#:   crashed on load);
#: - `midstream`: some tokens, then an NDJSON line `{"error": ...}` (a runner
#:   that died while generating: what Ollama streams then);
#: - `disconnect`: some tokens, then the connection is cut with no final line.
FAILURE_MODES = ("error", "midstream", "disconnect")

#: The version `/api/version` reports (an Ollama release with every endpoint served).
SERVER_VERSION = "0.12.3"

#: What a crashed runner says, as Ollama reports it.
RUNNER_CRASH = "llama runner process has terminated: exit status 2"


@dataclass(frozen=True, slots=True)
class LlmServerConfig:
    """Everything that shapes the server's answers; the same seed, the same answers."""

    models: tuple[str, ...] = DEFAULT_MODELS
    seed: int = 0
    #: Prompt evaluation: time to the first token of every generation.
    latency_ms: float = 20.0
    #: Extra time the first request for a model waits (loading it).
    load_ms: float = 0.0
    tokens_per_second: float = 100.0
    #: Generations of unspecified length are this many tokens at most
    #: (the length is drawn from the seed and the prompt, at least 4).
    max_output_tokens: int = 48
    #: The share of generations that fail (seeded, so reproducible).
    fail_rate: float = 0.0
    fail_mode: str = "error"
    #: Models every generation of which fails (`fail_mode`).
    fail_models: frozenset[str] = frozenset()
    #: Models `/api/tags` lists that answer 404 when used, as a model removed
    #: after it was listed does.
    missing_models: frozenset[str] = frozenset()
    #: Generations run at once (OLLAMA_NUM_PARALLEL; 1 serialises them).
    parallel: int = 1
    #: Generations that may wait for a slot (OLLAMA_MAX_QUEUE); more get 503.
    max_queue: int = 512

    def __post_init__(self) -> None:
        problems = []
        if not self.models:
            problems.append("at least one model is needed")
        if self.fail_mode not in FAILURE_MODES:
            problems.append(f"fail_mode is one of {', '.join(FAILURE_MODES)}")
        if not 0.0 <= self.fail_rate <= 1.0:
            problems.append("fail_rate is between 0 and 1")
        if self.tokens_per_second <= 0:
            problems.append("tokens_per_second must be positive")
        if self.latency_ms < 0 or self.load_ms < 0:
            problems.append("latency_ms and load_ms cannot be negative")
        if self.parallel < 1 or self.max_queue < 0 or self.max_output_tokens < 1:
            problems.append("parallel and max_output_tokens are at least 1, max_queue at least 0")
        unknown = sorted((self.fail_models | self.missing_models) - set(self.models))
        if unknown:
            problems.append(f"fail_models and missing_models must be listed models: {unknown}")
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> LlmServerConfig:
        """From a scenario's `llm:` options (the same names as the fields)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown llm option(s) {unknown}; known: {sorted(known)}")
        values: dict[str, Any] = dict(options)
        for name in ("models",):
            if name in values:
                values[name] = tuple(values[name])
        for name in ("fail_models", "missing_models"):
            if name in values:
                values[name] = frozenset(values[name])
        return cls(**values)

    @classmethod
    def from_scenario(cls, options: Mapping[str, Any]) -> tuple[LlmServerConfig, bool]:
        """A scenario's `options.llm`: the configuration, and whether anything
        listens (`reachable: false` is a backend that is down)."""
        settings = dict(options)
        reachable = bool(settings.pop("reachable", True))
        return cls.from_mapping(settings), reachable

    def to_arguments(self) -> list[str]:
        """The `tetherbed llm-server` flags that give this configuration."""
        args: list[str] = []
        for model in self.models:
            args += ["--model", model]
        defaults = LlmServerConfig()
        for name, flag in _FLAGS.items():
            value = getattr(self, name)
            if value != getattr(defaults, name):
                args += [flag, str(value)]
        for model in sorted(self.fail_models):
            args += ["--fail-model", model]
        for model in sorted(self.missing_models):
            args += ["--missing-model", model]
        return args


_FLAGS = {
    "seed": "--seed",
    "latency_ms": "--latency-ms",
    "load_ms": "--load-ms",
    "tokens_per_second": "--tokens-per-second",
    "max_output_tokens": "--max-output-tokens",
    "fail_rate": "--fail-rate",
    "fail_mode": "--fail-mode",
    "parallel": "--parallel",
    "max_queue": "--max-queue",
}
