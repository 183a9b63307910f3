"""Protocol definitions shared by hub, agent and simulator.

Pure: nothing here opens a socket or reads a clock.
"""
