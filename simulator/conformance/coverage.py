"""Coverage from the spec text: every normative sentence mapped to the cases that judge it.

docs/conformance-coverage.md holds one table per spec. Each row quotes a
sentence of the spec verbatim (a `|` written `\\|`) and says what judges it:
case ids in backticks, or `not observable by a peer: why`, or `pending:` and
the issue that brings its cases. `problems()` lists what is wrong with the
document against the spec texts and the registry:

- a sentence of the spec with MUST, SHOULD, SHALL or REQUIRED (any case) that
  no row quotes;
- a row whose quote is not in the spec (a typo, or a spec that changed);
- a row naming a case id that does not exist, or naming none and giving no
  reason;
- a case of the spec's suites that no row names (every case is keyed to the
  text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

NORMATIVE = re.compile(r"\b(must|should|shall|required)\b", re.IGNORECASE)
CASE_ID = re.compile(r"`([A-Z]{2,4}(?:-[a-z0-9]+)+)`")
UNOBSERVABLE = "not observable by a peer:"
PENDING = "pending:"
_CELL = re.compile(r"(?<!\\)\|")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"])")


def _normal(text: str) -> str:
    return " ".join(text.split())


def units(spec_text: str) -> Iterator[str]:
    """The spec's sentences: each line split at sentence ends; table rows whole.

    JSON examples (lines opening with a brace, bracket or quote) and fenced
    code blocks are left out: they show shapes, which the cases check field by
    field."""
    text = re.sub(r"```.*?```", "", spec_text, flags=re.DOTALL)
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in '{}[]"' or stripped.startswith(("<!--", "//")):
            continue
        stripped = stripped.lstrip("•-* ").strip()
        if stripped.startswith("|"):
            yield _normal(stripped)
            continue
        for part in _SENTENCE_END.split(stripped):
            if part.strip():
                yield _normal(part)


def normative(spec_text: str) -> list[str]:
    return [unit for unit in units(spec_text) if NORMATIVE.search(unit)]


@dataclass(frozen=True, slots=True)
class Row:
    spec: str
    number: str
    quote: str
    judged_by: str

    @property
    def cases(self) -> list[str]:
        return CASE_ID.findall(self.judged_by)


def rows(document: str, specs: Iterable[str]) -> list[Row]:
    """The table rows of each spec's section (a `## ` heading naming the spec)."""
    found: list[Row] = []
    current: str | None = None
    for line in document.splitlines():
        if line.startswith("## "):
            current = next((s for s in specs if s in line), None)
            continue
        if current is None or not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in _CELL.split(line.strip())[1:-1]]
        if len(cells) != 3 or cells[0] == "#":
            continue
        found.append(Row(current, cells[0], _normal(cells[1].replace("\\|", "|")), cells[2]))
    return found


def problems(
    document: str, spec_texts: Mapping[str, str], case_ids: Mapping[str, set[str]]
) -> list[str]:
    """Everything wrong with the coverage document (empty when it is complete).

    `spec_texts` maps a spec's section name to its text; `case_ids` maps the
    same name to the ids of the cases that judge it."""
    table = rows(document, spec_texts)
    found: list[str] = []
    known = set().union(*case_ids.values()) if case_ids else set()
    for spec, text in spec_texts.items():
        mine = [r for r in table if r.spec == spec]
        quoted = {r.quote for r in mine}
        flat = _normal(text)
        for sentence in normative(text):
            if sentence not in quoted:
                found.append(f"{spec}: no row quotes the normative sentence {sentence!r}")
        for row in mine:
            if row.quote not in flat:
                found.append(f"{spec} {row.number}: the quote is not in the spec: {row.quote!r}")
            cited = row.cases
            unknown = [c for c in cited if c not in known]
            if unknown:
                found.append(f"{spec} {row.number}: no such case {unknown}")
            reason = row.judged_by.lower()
            if not cited and not reason.startswith((UNOBSERVABLE, PENDING)):
                found.append(f"{spec} {row.number}: names no case and gives no reason")
        cited_here = {c for r in mine for c in r.cases}
        for case_id in sorted(case_ids.get(spec, set()) - cited_here):
            found.append(f"{spec}: case {case_id} is keyed to no sentence of the spec")
    return found
