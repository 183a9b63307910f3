"""The docker backend: one container per machine, a fault proxy beside each agent.

`backend.DockerBackend` is imported lazily by the runner, so that nothing here
loads testcontainers until a docker run asks for it.
"""
