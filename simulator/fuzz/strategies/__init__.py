"""Hypothesis strategies for every message of the three specs, read off the `wire/` models.

    from tetherbed.fuzz.strategies import local_executor, dsh, crossdesk

    @given(local_executor.frames(("FILE_READ",)))           # valid frames
    @given(local_executor.near_valid_frames())              # one thing broken
    @given(dsh.bodies("ENROLL_REQUEST"))                    # a dsh-computers body
    @given(crossdesk.near_valid_lines())                    # a native request line

Valid values are accepted by the models (both readings of local-executor: the
lenient one of `wire/messages.py` and the strict one of `wire/strict.py`);
near-valid ones carry the name of what was broken (`mutations.MUTATIONS` and each
module's `ENVELOPE_MUTATIONS`), so a property can say which answer the spec calls
for. docs/fuzzing.md shows how to use them in your own tests.
"""

from tetherbed.simulator.fuzz.strategies import crossdesk, dsh, local_executor, mutations
from tetherbed.simulator.fuzz.strategies.from_models import json_values, values
from tetherbed.simulator.fuzz.strategies.mutations import MUTATIONS, Mutant

__all__ = [
    "MUTATIONS",
    "Mutant",
    "crossdesk",
    "dsh",
    "json_values",
    "local_executor",
    "mutations",
    "values",
]
