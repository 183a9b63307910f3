"""The event-loop cost of one request in the agent, by payload size.

    .venv/bin/python bench/agent_dispatch.py [--rounds 30]

Two steps run on the event loop for every request, whatever its size:

* dispatch: `AgentRuntime._perform` for one admitted request (between reading
  the frame and starting its task), the operation itself stubbed out, without
  and with an event journal (`--journal` records each request's payload
  digest, which hashes the payload);
* audit: the details of the request's audit record (a FILE_WRITE records the
  byte length of its content, never the content), for UTF-8 and base64.

For a 192-byte FILE_STAT and a 10 MiB FILE_WRITE it prints medians and the
ratio of the 10 MiB cost to the small one, measured in the same run: on the
loop, a large request should cost about what a small one does unless something
records its digest.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from tetherbed.agent.actions import Run
from tetherbed.agent.audit.redaction import audit_details
from tetherbed.agent.audit.sink import NullAuditSink
from tetherbed.agent.config import AgentConfig
from tetherbed.agent.runtime import AgentRuntime, _Served
from tetherbed.wire.messages import Empty, FileStat, FileWrite, MessageType

TARGET_RATIO = 3.0  # a 10 MiB dispatch may cost a few times a small one, not 1000x
AUDIT_TARGET_MS = 2.0  # audit details of a 10 MiB write, on the loop


class _Done:
    limits: Any = None

    async def run(self, kind: MessageType, payload: Any) -> tuple[MessageType, Any]:
        return MessageType.ACK, Empty()


class _Transport:
    async def send(self, data: bytes) -> None:
        return None


def _request(size: int) -> tuple[MessageType, Any, msgspec.Raw]:
    if size <= 192:
        payload = FileStat(path="/w/data.csv")
        return MessageType.FILE_STAT, payload, msgspec.Raw(msgspec.json.encode(payload))
    payload = FileWrite(path="/w/big.bin", content="a" * size)
    return MessageType.FILE_WRITE, payload, msgspec.Raw(msgspec.json.encode(payload))


async def _median_dispatch(runtime: AgentRuntime, size: int, rounds: int) -> float:
    kind, payload, raw = _request(size)
    samples = []
    for i in range(rounds):
        run = Run(f"r{i}", kind, payload, raw)
        started = time.perf_counter()
        await runtime._perform([run], _Protocol(), _Transport(), _Served())  # type: ignore[arg-type]
        samples.append(time.perf_counter() - started)
        await asyncio.sleep(0)  # let the stubbed task finish
    return statistics.median(samples)


class _Protocol:
    def complete(self, *args: Any) -> list[Any]:
        return []

    def fail(self, *args: Any) -> list[Any]:
        return []


async def main(rounds: int) -> int:
    print(f"agent request dispatch on the event loop, median of {rounds}")
    print(f"{'journal':>8} {'192 B':>10} {'10 MiB':>10} {'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for journal in (None, str(Path(tmp) / "journal.jsonl")):
            config = AgentConfig(
                hub_url="ws://x", token="t", root=tmp, session_id="s1", journal=journal
            )
            runtime = AgentRuntime(
                config,
                connector=None,
                operations=_Done(),
                audit=NullAuditSink(),  # type: ignore[arg-type]
            )
            small = await _median_dispatch(runtime, 192, rounds)
            large = await _median_dispatch(runtime, 10 * 1024 * 1024, rounds)
            ratio = large / small
            verdict = "PASS" if journal is not None or ratio <= TARGET_RATIO else "MISS"
            label = "on" if journal else "off"
            print(
                f"{label:>8} {small * 1e6:>8.1f}µs {large * 1e6:>8.1f}µs {ratio:>7.1f}x"
                + ("" if journal else f"  target ≤ {TARGET_RATIO}x without a journal: {verdict}")
            )
            await runtime.close()
    print(f"\naudit record details of one request, median of {rounds}")
    small = _median(lambda: audit_details(MessageType.FILE_STAT, {"path": "/w/a"}), rounds)
    print(f"{'192 B FILE_STAT':>22} {small * 1e3:>8.3f} ms")
    text = "a" * (10 << 20)
    for encoding, content in (
        ("utf-8", text),
        ("base64", base64.b64encode(text.encode()).decode()),
    ):
        payload = FileWrite(path="/w/big", content=content, encoding=encoding)  # type: ignore[arg-type]
        large = _median(lambda p=payload: audit_details(MessageType.FILE_WRITE, p), rounds)
        verdict = "PASS" if large * 1e3 <= AUDIT_TARGET_MS else "MISS"
        print(
            f"{'10 MiB FILE_WRITE ' + encoding:>22} {large * 1e3:>8.3f} ms "
            f"{large / small:>9.0f}x  target ≤ {AUDIT_TARGET_MS} ms: {verdict}"
        )
    return 0


def _median(function: Any, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    raise SystemExit(asyncio.run(main(parser.parse_args().rounds)))
