"""JUnit XML of a conformance run: one <testcase> per case, for CI test views.

A MUST that fails is a <failure> (unless listed in --expect-fail, then it is
<skipped> with the reason "expected failure"); a case the test bed could not
run is an <error>; not applicable is <skipped>. Warnings, information and
unknowns pass in CI's eyes but carry a `verdict` property and a line in
<system-out>, where CI shows them; the frames of a failing case go to
<system-out> too.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tetherbed.simulator.conformance.levels import Outcome
from tetherbed.simulator.conformance.results import CaseResult, RunResult
from tetherbed.simulator.reports.junit import clean

#: Frames quoted in <system-out> of a failing case.
FRAME_LINES = 60


def junit_xml(result: RunResult) -> bytes:
    counts = result.counts()
    suite = ET.Element(
        "testsuite",
        {
            "name": f"conformance.{result.suite}",
            "tests": str(len(result.results)),
            "failures": str(len(result.unexpected_failures())),
            "errors": str(counts[Outcome.ERROR]),
            "skipped": str(
                counts[Outcome.SKIP]
                + sum(1 for r in result.results if r.expected_failure and r.outcome is Outcome.FAIL)
            ),
            "time": f"{result.duration:.3f}",
            "timestamp": result.started,
        },
    )
    properties = ET.SubElement(suite, "properties")
    _property(properties, "target", result.target)
    _property(properties, "summary", result.summary_line())
    for name, reading in result.profile.items():
        _property(properties, f"profile.{name}", reading)
    for case in result.results:
        _testcase(suite, case)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _testcase(parent: ET.Element, case: CaseResult) -> None:
    element = ET.SubElement(
        parent,
        "testcase",
        {
            "classname": f"{case.suite}.{case.family}",
            "name": case.id,
            "time": f"{case.duration:.3f}",
        },
    )
    properties = ET.SubElement(element, "properties")
    _property(properties, "level", str(case.level))
    _property(properties, "verdict", case.label)
    _property(properties, "section", case.section)
    message = clean(case.reason or case.rule)
    if case.outcome is Outcome.FAIL and case.expected_failure:
        ET.SubElement(element, "skipped", {"message": clean(f"expected failure: {case.reason}")})
    elif case.outcome is Outcome.FAIL:
        failure = ET.SubElement(element, "failure", {"message": message, "type": "MUST"})
        failure.text = clean(f"{case.rule}\n[{case.section}]\n{case.reason}")
    elif case.outcome is Outcome.ERROR:
        ET.SubElement(element, "error", {"message": message})
    elif case.outcome is Outcome.SKIP:
        ET.SubElement(element, "skipped", {"message": message})
    out = [f"{case.label}: {case.reason}" if case.reason else case.label, *case.observations]
    if case.outcome in (Outcome.FAIL, Outcome.ERROR, Outcome.WARN):
        out += [
            f"{e.t:8.3f} {e.channel} {e.direction} {e.kind} {e.text}"
            for e in case.evidence[:FRAME_LINES]
        ]
    ET.SubElement(element, "system-out").text = clean("\n".join(out))


def _property(parent: ET.Element, name: str, value: str) -> None:
    ET.SubElement(parent, "property", {"name": name, "value": clean(value)})
