"""What every driver is handed instead of the real world.

A clock, a message transport (and its `websockets` adapter), an event log and
the event-loop runner. Cores take these as parameters, so the simulator can
substitute virtual time and an in-memory network.
"""
