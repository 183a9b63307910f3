"""`tetherbed load PROFILE --worker --master-host HOST`: a worker for a master elsewhere.

The master (`tetherbed load PROFILE --master --expect-workers N`, on the
machine that runs the hub or reaches it) sends the plan with its first spawn
message; a worker needs only the profile and the master's address.
"""

from __future__ import annotations

import argparse
import sys

from tetherbed.load import locust_process


def run_worker(args: argparse.Namespace) -> int:
    processes = max(args.workers, 1)
    run = locust_process.start_worker(
        args.profile, args.out, args.master_host, args.master_port, processes
    )
    print(
        f"tetherbed load {args.profile}: {processes} worker process(es) for the master at "
        f"{args.master_host}:{args.master_port}; log in {run.log_path}",
        flush=True,
    )
    try:
        return run.process.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        run.kill()
        if run.process.returncode not in (0, None):
            print(run.log(), file=sys.stderr)
