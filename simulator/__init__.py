"""The simulator: topologies, backends, faults, histories, checkers, scenarios."""
