"""Property-based protocol fuzzing.

Strategies for every message, stateful machines, path properties, live targets.
"""
