"""Public home of the message strategies (the code is `tetherbed.simulator.fuzz.strategies`).

from tetherbed.fuzz.strategies import local_executor, dsh, crossdesk

It re-exports that package's `__all__`, so the public names have one list.
"""

from tetherbed.simulator.fuzz import strategies as _strategies
from tetherbed.simulator.fuzz.strategies import *  # noqa: F403

__all__ = _strategies.__all__
