"""A failure found by live fuzzing, written so that it can be replayed.

`case-<target>-<digest>.json` holds what was sent (each step exactly, bytes that are
not UTF-8 kept through `surrogateescape`), the problems found and the seed;
`tetherbed fuzz TARGET --replay FILE` sends it again. A sequence the target can
express as a scenario is also written beside it (`.yaml`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "tetherbed-fuzz-case/1"


class CaseError(ValueError):
    """A case file that cannot be read."""


@dataclass(slots=True)
class FuzzCase:
    target: str
    description: str
    seed: int
    problems: list[str]
    steps: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "target": self.target,
            "description": self.description,
            "seed": self.seed,
            "problems": self.problems,
            "steps": self.steps,
        }

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.steps, sort_keys=True).encode()).hexdigest()[:12]

    def write(self, folder: Path, *, scenario: str | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"case-{self.target}-{self.digest()}.json"
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        if scenario is not None:
            path.with_suffix(".yaml").write_text(scenario, encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> FuzzCase:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CaseError(f"cannot read {path}: {exc}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise CaseError(f"{path} is not a fuzz case ({FORMAT})")
        try:
            return cls(
                target=str(raw["target"]),
                description=str(raw.get("description", "")),
                seed=int(raw.get("seed", 0)),
                problems=[str(p) for p in raw.get("problems", [])],
                steps=list(raw["steps"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CaseError(f"{path}: {exc}") from None
