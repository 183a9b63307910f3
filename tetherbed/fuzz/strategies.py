"""Public home of the message strategies (the code is `tetherbed.simulator.fuzz.strategies`).

from tetherbed.fuzz.strategies import local_executor, dsh, crossdesk
"""

from tetherbed.simulator.fuzz.strategies import (
    MUTATIONS,
    Mutant,
    crossdesk,
    dsh,
    json_values,
    local_executor,
    mutations,
    values,
)

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
