"""The per-request payload digest is computed only when an event journal records it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.agent.platform_double import Platform
from tetherbed.agent import runtime as runtime_module
from tetherbed.agent.config import AgentConfig


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real = runtime_module._digest

    def counting(raw: Any) -> str | None:
        calls.append(raw)
        return real(raw)

    monkeypatch.setattr(runtime_module, "_digest", counting)
    return calls


@pytest.mark.parametrize("journal", [False, True])
async def test_digest_only_when_recorded(tmp_path: Path, digests: list[Any], journal: bool) -> None:
    root = tmp_path / "root"
    root.mkdir()
    config = AgentConfig(
        hub_url="ws://hub",
        token="t",
        root=str(root),
        session_id="s1",
        machine_id="m1",
        display="",
        state_dir=str(tmp_path / "state"),
        journal=str(tmp_path / "journal.jsonl") if journal else None,
    )
    async with Platform.serve(config) as platform:
        answer = await platform.call("FILE_WRITE", {"path": f"{root}/a", "content": "x" * 4096})
        assert answer["type"] == "ACK"
    assert len(digests) == (1 if journal else 0)
