"""The sim backend: hub and agents in one virtual-time event loop."""
