"""Backends: sim (one virtual-time loop), process (real processes), docker."""
