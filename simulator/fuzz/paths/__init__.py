"""Path-jail properties on the real file system: generated paths, symlink swaps,
and a sentinel tree outside the root that must never change or leak."""

from tetherbed.simulator.fuzz.paths.arena import Arena
from tetherbed.simulator.fuzz.paths.jail_judge import JailJudge, Operation, operations
from tetherbed.simulator.fuzz.paths.path_strategies import components, wire_paths
from tetherbed.simulator.fuzz.paths.symlink_swapper import SymlinkSwapper

__all__ = [
    "Arena",
    "JailJudge",
    "Operation",
    "SymlinkSwapper",
    "components",
    "operations",
    "wire_paths",
]
