"""dsh-computers on the sim backend: the reference hub's routes and SSE agents
in virtual time.

The hub side is the reference hub's own aiohttp application and `DshServer`
(hub/dsh), fed by `sim/tcp.py`'s in-memory connections; the agent side is
the reference agent's driver (`agent/dsh/runner.py`) with the sim network in
place of sockets and the sim shell in place of processes (`agent.py`).
`nodes.py` gives the sim backend its SSE agents: enroll, start, stop, kill,
pause and resume.
"""
