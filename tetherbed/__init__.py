"""Tetherbed: a test bed and simulator harness for agents that dial out to a hub."""

__version__ = "0.1.0"
