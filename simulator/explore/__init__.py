"""Exploration: seeded interleavings, seed sweeps, generated workloads, a nemesis, shrinking."""
