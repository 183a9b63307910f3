"""What the sim shell does with shell language it does not implement: refuse it.

A result that differs from `sh`'s would hide a bug (a scenario that passes on
sim and fails on a real machine), so whatever the sim shell does not
implement stops the whole script with exit status 127 and a message on
stderr naming what was refused. Nothing after the refusal runs.
"""

from __future__ import annotations

#: What a refused script exits with (a shell's "command not found").
REFUSED_EXIT = 127

#: Every refusal message starts with this, so a test can tell it from `sh`'s.
REFUSAL_PREFIX = "tetherbed sim shell: "


class Refused(Exception):
    """Shell language the sim shell does not implement; `what` says which."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what

    @property
    def message(self) -> str:
        return f"{REFUSAL_PREFIX}{self.what}; run on the process backend\n"
