"""The server's sans-I/O core: an HTTP request in, a reply or a timed plan out.

`handle(method, path, body)` answers every endpoint. An answer in one piece
is a `Reply`; a generation is a `Plan`: the NDJSON lines to send and how long
after the previous one each is due, plus how it ends (a final `done` line, an
`{"error"}` line, or a cut connection). The driver plays the plan (`runner.py`)
and stamps `created_at` when a line leaves. Timings in the final line are the
planned ones, so the same seed gives byte-identical answers apart from
`created_at`.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tetherbed.simulator.peripherals.llm_server import text
from tetherbed.simulator.peripherals.llm_server.config import (
    RUNNER_CRASH,
    SERVER_VERSION,
    LlmServerConfig,
)

#: What Ollama answers when its queue is full (OLLAMA_MAX_QUEUE).
SERVER_BUSY = "server busy, please try again.  maximum pending requests exceeded"
ROOT_TEXT = "Ollama is running"
#: Ollama's timestamps for models: fixed, so answers do not drift.
MODIFIED_AT = "2025-01-01T00:00:00Z"
_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer in one piece: JSON when `body` is a dict, else plain text."""

    status: int
    body: dict[str, Any] | str


@dataclass(frozen=True, slots=True)
class Line:
    """One NDJSON object, due `delay` seconds after the line before it."""

    delay: float
    fields: dict[str, Any]


@dataclass(slots=True)
class Plan:
    """A generation: the lines of its stream, in order, and how it ends."""

    endpoint: str  # "chat" or "generate"
    model: str
    stream: bool
    lines: list[Line] = field(default_factory=list)
    #: The stream breaks after its lines: no final line, the connection is cut.
    cut: bool = False
    #: The generation failed before its first token: this is the whole answer.
    failure: Reply | None = None

    @property
    def duration(self) -> float:
        return sum(line.delay for line in self.lines)

    def assembled(self) -> Reply | None:
        """The one-piece answer of a `stream: false` request (None: cut)."""
        if self.failure is not None:
            return self.failure
        if self.cut:
            return None
        last = self.lines[-1].fields
        if "error" in last:
            return Reply(500, {"error": last["error"]})
        key = "message" if self.endpoint == "chat" else "response"
        parts = [
            line.fields["message"]["content"] if key == "message" else line.fields["response"]
            for line in self.lines
        ]
        final = dict(last)
        if key == "message":
            final["message"] = {"role": "assistant", "content": "".join(parts)}
        else:
            final["response"] = "".join(parts)
        return Reply(200, final)


class _ChatMessage(msgspec.Struct):
    role: str
    content: str = ""


class _Options(msgspec.Struct):
    num_predict: int | None = None
    seed: int | None = None


class _ChatRequest(msgspec.Struct):
    model: str = ""
    messages: list[_ChatMessage] = []
    stream: bool = True
    options: _Options | None = None


class _GenerateRequest(msgspec.Struct):
    model: str = ""
    prompt: str = ""
    system: str = ""
    stream: bool = True
    options: _Options | None = None


class _ModelRequest(msgspec.Struct):
    model: str = ""
    name: str = ""  # the older spelling of `model`


class LlmServerCore:
    """The Ollama API as plain calls. One instance per server."""

    def __init__(self, config: LlmServerConfig) -> None:
        self.config = config
        self.loaded: set[str] = set()
        self.generations = 0

    # --- dispatch --------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes = b"") -> Reply | Plan:
        route = _ROUTES.get(path.rstrip("/") or "/")
        if route is None:
            return Reply(404, "404 page not found")
        allowed, name = route
        if method == "HEAD" and "GET" in allowed:
            method = "GET"
        if method not in allowed:
            return Reply(405, "405 method not allowed")
        handler = getattr(self, name)
        return handler(body) if method == "POST" else handler()

    # --- listing -----------------------------------------------------------------

    def root(self) -> Reply:
        return Reply(200, ROOT_TEXT)

    def version(self) -> Reply:
        return Reply(200, {"version": SERVER_VERSION})

    def tags(self) -> Reply:
        return Reply(200, {"models": [self._describe(m) for m in self.config.models]})

    def ps(self) -> Reply:
        loaded = [m for m in self.config.models if m in self.loaded]
        return Reply(
            200,
            {
                "models": [
                    {
                        **self._describe(m),
                        "expires_at": "2099-01-01T00:00:00Z",
                        "size_vram": _size(m),
                        "context_length": 4096,
                    }
                    for m in loaded
                ]
            },
        )

    def show(self, body: bytes) -> Reply:
        try:
            request = msgspec.json.decode(body or b"{}", type=_ModelRequest)
        except msgspec.MsgspecError as exc:
            return _bad_request(exc)
        model = request.model or request.name
        if not model:
            return Reply(400, {"error": "model is required"})
        if model not in self.config.models or model in self.config.missing_models:
            return Reply(404, {"error": f"model '{model}' not found"})
        details = self._describe(model)["details"]
        return Reply(
            200,
            {
                "modelfile": f"FROM {model}\n",
                "parameters": "stop <|eot|>",
                "template": "{{ .Prompt }}",
                "details": details,
                "model_info": {"general.architecture": details["family"]},
                "capabilities": ["completion"],
                "modified_at": MODIFIED_AT,
            },
        )

    # --- generation ----------------------------------------------------------------

    def chat(self, body: bytes) -> Reply | Plan:
        try:
            request = msgspec.json.decode(body or b"{}", type=_ChatRequest)
        except msgspec.MsgspecError as exc:
            return _bad_request(exc)
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        return self._generation("chat", request.model, request.stream, request.options, messages)

    def generate(self, body: bytes) -> Reply | Plan:
        try:
            request = msgspec.json.decode(body or b"{}", type=_GenerateRequest)
        except msgspec.MsgspecError as exc:
            return _bad_request(exc)
        messages = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        if request.prompt:
            messages.append({"role": "user", "content": request.prompt})
        return self._generation(
            "generate", request.model, request.stream, request.options, messages
        )

    def _generation(
        self,
        endpoint: str,
        model: str,
        stream: bool,
        options: _Options | None,
        messages: list[dict[str, Any]],
    ) -> Reply | Plan:
        config = self.config
        if not model:
            return Reply(400, {"error": "model is required"})
        if model not in config.models or model in config.missing_models:
            return Reply(404, {"error": f'model "{model}" not found, try pulling it first'})
        plan = Plan(endpoint, model, stream)
        load = 0.0 if model in self.loaded else config.load_ms / 1000
        self.loaded.add(model)
        if not messages:
            # Ollama answers an empty prompt by loading the model: done_reason "load".
            loaded = self._final(
                plan, "load", load=load, latency=0.0, prompt=0, completion=0, eval_time=0.0
            )
            plan.lines.append(Line(load, loaded))
            return plan
        self.generations += 1
        fails = self._fails(model)
        latency = config.latency_ms / 1000
        if fails and config.fail_mode == "error":
            plan.failure = Reply(500, {"error": RUNNER_CRASH})
            plan.lines.append(Line(load + latency, {}))
            return plan
        num_predict = options.num_predict if options is not None else None
        limit = num_predict if num_predict is not None and num_predict >= 0 else 1 << 30
        seed = options.seed if options is not None and options.seed is not None else config.seed
        tokens, cut_short = text.generate(seed, model, messages, limit, config.max_output_tokens)
        step = 1 / config.tokens_per_second
        if fails:
            tokens = tokens[: max(1, len(tokens) // 2)]
        for i, token in enumerate(tokens):
            delay = load + latency if i == 0 else step
            plan.lines.append(Line(delay, self._piece(plan, token)))
        if fails:
            if config.fail_mode == "midstream":
                plan.lines.append(Line(step, {"error": RUNNER_CRASH}))
            else:
                plan.cut = True
            return plan
        reason = "length" if cut_short else "stop"
        eval_time = step * max(len(tokens) - 1, 0)
        prompt = text.prompt_tokens(messages)
        final = self._final(
            plan,
            reason,
            load=load,
            latency=latency,
            prompt=prompt,
            completion=len(tokens),
            eval_time=eval_time,
        )
        plan.lines.append(Line(0.0 if tokens else load + latency, final))
        return plan

    def _fails(self, model: str) -> bool:
        config = self.config
        if model in config.fail_models:
            return True
        if config.fail_rate <= 0:
            return False
        draw = random.Random(f"{config.seed}/fail/{self.generations}").random()
        return draw < config.fail_rate

    def _piece(self, plan: Plan, token: str) -> dict[str, Any]:
        head: dict[str, Any] = {"model": plan.model, "created_at": ""}
        if plan.endpoint == "chat":
            return {**head, "message": {"role": "assistant", "content": token}, "done": False}
        return {**head, "response": token, "done": False}

    def _final(
        self,
        plan: Plan,
        reason: str,
        *,
        load: float,
        latency: float,
        prompt: int,
        completion: int,
        eval_time: float,
    ) -> dict[str, Any]:
        final = self._piece(plan, "")
        final["done_reason"] = reason
        final["done"] = True
        if plan.endpoint == "generate" and reason != "load":
            final["context"] = [_token_id(plan.model, i) for i in range(prompt + completion)]
        final.update(
            total_duration=round((load + latency + eval_time) * _NS),
            load_duration=round(load * _NS),
        )
        if reason != "load":
            final.update(
                prompt_eval_count=prompt,
                prompt_eval_duration=round(latency * _NS),
                eval_count=completion,
                eval_duration=round(eval_time * _NS),
            )
        return final

    def _describe(self, model: str) -> dict[str, Any]:
        family = model.split(":", maxsplit=1)[0].rstrip("0123456789.") or model
        size = model.partition(":")[2].upper() or "7B"
        return {
            "name": model,
            "model": model,
            "modified_at": MODIFIED_AT,
            "size": _size(model),
            "digest": hashlib.sha256(model.encode()).hexdigest(),
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": family,
                "families": [family],
                "parameter_size": size,
                "quantization_level": "Q4_K_M",
            },
        }


#: path → (methods, handler name)
_ROUTES: dict[str, tuple[frozenset[str], str]] = {
    "/": (frozenset({"GET"}), "root"),
    "/api/version": (frozenset({"GET"}), "version"),
    "/api/tags": (frozenset({"GET"}), "tags"),
    "/api/ps": (frozenset({"GET"}), "ps"),
    "/api/show": (frozenset({"POST"}), "show"),
    "/api/chat": (frozenset({"POST"}), "chat"),
    "/api/generate": (frozenset({"POST"}), "generate"),
}


def _bad_request(exc: Exception) -> Reply:
    return Reply(400, {"error": f"invalid request body: {exc}"})


def _size(model: str) -> int:
    return 1_000_000_000 + int(hashlib.sha256(model.encode()).hexdigest()[:6], 16)


def _token_id(model: str, index: int) -> int:
    return int(hashlib.sha256(f"{model}/{index}".encode()).hexdigest()[:4], 16)
