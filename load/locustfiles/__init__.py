"""Locustfiles, one per profile; `tetherbed load PROFILE` runs them (docs/load.md)."""
