"""Load tests: Locust profiles against any hub, and the `tetherbed load` command (docs/load.md).

The orchestrating side (`cli.py`, `topology.py`, `locust_process.py`,
`profiles/`, `analysis/`) never imports Locust: Locust patches the standard
library with gevent, so it runs in its own processes. The gevent side — the
locustfiles and the users they are built from — lives in `locustfiles/` and
`users/`.
"""
