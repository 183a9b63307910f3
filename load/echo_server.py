"""A raw `websockets` echo server: the ceiling a load generator can reach.

`tetherbed load relay` runs its clients against this server for a few
seconds, in the same run as the real load, so the summary can say how close
the hub's rate comes to what the generator itself can do (if it comes close,
the generator, not the hub, is the bottleneck: add workers or machines).
Every message comes back unchanged; the load clients accept an echo of their
request as its answer. Prints `echo listening on ws://HOST:PORT`, serves until
SIGTERM.

    python -m tetherbed.load.echo_server
"""

from __future__ import annotations

import asyncio
import signal

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from tetherbed.runtime import event_loop
from tetherbed.wire.limits import FRAME_LIMIT_BYTES


async def _echo(conn: ServerConnection) -> None:
    try:
        while True:
            data = await conn.recv(decode=False)
            await conn.send(data, text=True)
    except ConnectionClosed:
        pass


async def _serve() -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with serve(
        _echo,
        "127.0.0.1",
        0,
        compression=None,
        max_size=FRAME_LIMIT_BYTES,
        ping_interval=None,
    ) as server:
        host, port = next(iter(server.sockets)).getsockname()[:2]
        print(f"echo listening on ws://{host}:{port}", flush=True)
        await stop.wait()
    return 0


def main() -> int:
    return event_loop.run(_serve())


if __name__ == "__main__":
    raise SystemExit(main())
