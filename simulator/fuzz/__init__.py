"""Property-based protocol fuzzing: strategies for every message, stateful machines, path properties, live targets."""
