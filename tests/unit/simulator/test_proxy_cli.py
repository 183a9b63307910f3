"""`main(argv)` as a real process: prints its addresses, serves, exits 0 on SIGTERM."""

from __future__ import annotations

import asyncio
import re
import signal
import sys

import aiohttp
import pytest

from tetherbed.simulator.proxy.cli import build_parser

LAUNCH = "from tetherbed.simulator.proxy.cli import main; raise SystemExit(main())"


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", LAUNCH, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_serves_the_api_and_the_proxies_then_stops_on_sigterm():
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    upstream = f"127.0.0.1:{echo.sockets[0].getsockname()[1]}"
    process = await _start("--api", "127.0.0.1:0", "--proxy", f"e=127.0.0.1:0={upstream}")
    try:
        assert process.stdout is not None
        first = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
        api = re.fullmatch(r"tetherbed proxy API listening on (http://\S+)\n", first)
        assert api, first
        second = (await asyncio.wait_for(process.stdout.readline(), 5)).decode()
        line = re.fullmatch(r"tetherbed proxy e listening on (\S+) -> (\S+)\n", second)
        assert line and line.group(2) == upstream, second
        host, port = line.group(1).rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"through")
        assert await asyncio.wait_for(reader.readexactly(7), 5) == b"through"
        writer.close()
        async with (
            aiohttp.ClientSession() as session,
            session.get(api.group(1) + "/proxies") as response,
        ):
            assert (await response.json())["e"]["listen"] == line.group(1)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 20) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        echo.close()


async def test_a_proxy_that_cannot_listen_exits_1():
    taken = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = taken.sockets[0].getsockname()[1]
    process = await _start("--api", "127.0.0.1:0", "--proxy", f"x=127.0.0.1:{port}=127.0.0.1:1")
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
        assert process.returncode == 1
        assert b"cannot listen" in stderr
    finally:
        taken.close()


@pytest.mark.parametrize(
    "argv",
    [["--proxy", "only-a-name"], ["--proxy", "n=127.0.0.1=127.0.0.1:1"], ["--api", "nope"]],
)
def test_bad_arguments_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2


def test_defaults_match_toxiproxy():
    args = build_parser().parse_args([])
    assert args.api == ("127.0.0.1", 8474)
    assert args.proxy == []
