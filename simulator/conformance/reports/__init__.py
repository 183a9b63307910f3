"""Reports of a conformance run: the terminal table, conformance.json, JUnit XML, HTML.

Each is a pure function of a `RunResult`; `write_reports` puts a run's files in
their own folder under the report directory and refreshes the index page that
opens every run kept there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tetherbed.simulator.conformance.reports.html import write_index, write_run_page
from tetherbed.simulator.conformance.reports.junit import junit_xml
from tetherbed.simulator.conformance.reports.terminal import table_lines
from tetherbed.simulator.conformance.results import RunResult

__all__ = ["run_folder_name", "table_lines", "write_reports"]


def run_folder_name(result: RunResult) -> str:
    stamp = re.sub(r"[^0-9A-Za-z]", "", result.started)[:15]
    return f"{stamp}-{result.suite}"


def write_reports(result: RunResult, directory: Path) -> Path:
    """conformance.json, junit.xml and index.html of this run; the index of all runs."""
    folder = directory / run_folder_name(result)
    number = 1
    while folder.exists():
        number += 1
        folder = directory / f"{run_folder_name(result)}-{number}"
    folder.mkdir(parents=True)
    data = result.to_dict()
    (folder / "conformance.json").write_text(
        json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (folder / "junit.xml").write_bytes(junit_xml(result))
    write_run_page(result, folder / "index.html")
    write_index(directory)
    return folder
