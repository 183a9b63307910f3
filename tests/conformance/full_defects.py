"""`make conform-defects`: every planted defect against its whole suite (long: about 40 min).

    python -m tests.conformance.full_defects [NAME ...]

Asserts the same ids as `make test`'s family-restricted runs, so the
restriction hides nothing. Prints one line per defect: its summary and time.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from tests.conformance.harness import conform
from tests.conformance.planted import PLANTED


def main(argv: list[str]) -> int:
    chosen = [p for p in PLANTED if not argv or p.name in argv]
    failed = []
    for planted in chosen:
        with tempfile.TemporaryDirectory() as folder:
            started = time.monotonic()
            extra = ("--xvfb",) if planted.suite == "agent" and "--xvfb" not in planted.args else ()
            report = conform(
                planted.suite,
                *planted.args,
                *extra,
                command=list(planted.command) or None,
                tmp=Path(folder),
            )
            took = time.monotonic() - started
        got_fail, got_warn = report.ids("fail"), report.ids("warn")
        ok = got_fail == planted.fails and got_warn == planted.warns
        verdict = "ok  " if ok else "FAIL"
        print(f"{verdict} {planted.suite} {planted.name}: {report.summary} ({took:.0f} s)")
        if not ok:
            failed.append(planted.name)
            extra = sorted((got_fail - planted.fails) | (got_warn - planted.warns))
            missing = sorted((planted.fails - got_fail) | (planted.warns - got_warn))
            print(f"     extra: {extra}  missing: {missing}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
