"""Container healthchecks of the compose stack: `healthcheck.py hub|machine`.

Exit 0 when healthy; otherwise print why and exit 1 (Docker keeps the text in
`docker inspect --format '{{json .State.Health}}'`, where the tests read it).

hub:     GET /healthz answers {"ok": true}.
machine: the Xvfb display answers, every virtual serial port exists, and the
         hub reports this machine's data-mode session connected by this
         machine's id (and, with the control agent on, its control
         connection present in /v1/machines). Asking the hub, rather than
         trusting a local marker, proves the whole path: token, network,
         handshake.

Standard library only, and quick: Docker runs it every few seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

TIMEOUT = 3.0


def get_json(url: str, token: str | None = None) -> object:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return json.load(response)


def check_hub() -> str | None:
    port = os.environ.get("TETHERBED_HUB_LISTEN_PORT", "8765")
    health = get_json(f"http://127.0.0.1:{port}/healthz")
    if not isinstance(health, dict) or health.get("ok") is not True:
        return f"/healthz answered {health!r}"
    return None


def check_machine() -> str | None:
    display = os.environ.get("DISPLAY", ":1")
    try:
        subprocess.run(
            ["xdpyinfo", "-display", display],
            capture_output=True,
            check=True,
            timeout=TIMEOUT,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return f"the X display {display} does not answer: {exc}"

    ports_file = Path("/run/tetherbed/serial/ports.json")
    if not ports_file.exists():
        return "the virtual serial ports are not set up yet"
    for entry in json.loads(ports_file.read_text()):
        for end in (entry["port"], entry["device_end"]):
            if not os.path.exists(end):
                return f"serial port end {end} is missing"

    hub = os.environ.get("TETHERBED_HUB_URL", "ws://hub:8765")
    base = "http" + hub.removeprefix("ws") if hub.startswith("ws") else hub
    token_file = Path(os.environ.get("TETHERBED_TOKEN_DIR", "/run/tetherbed/tokens")) / (
        "client.token"
    )
    token = token_file.read_text().strip()
    machine_id = os.environ["TETHERBED_MACHINE_ID"]
    session_id = os.environ["TETHERBED_SESSION_ID"]

    sessions = get_json(f"{base}/v1/sessions", token)["sessions"]  # type: ignore[index]
    mine = [s for s in sessions if s["session_id"] == session_id]
    if not mine or not mine[0]["connected"]:
        return f"the hub has no agent connected on {session_id}"
    if mine[0]["machine_id"] != machine_id:
        return f"{session_id} is held by {mine[0]['machine_id']}, not {machine_id}"
    if os.environ.get("TETHERBED_CONTROL_AGENT", "1") == "1":
        machines = get_json(f"{base}/v1/machines", token)["machines"]  # type: ignore[index]
        if machine_id not in {m["machine_id"] for m in machines}:
            return f"the hub has no control connection from {machine_id}"
    return None


def main(argv: list[str]) -> int:
    checks = {"hub": check_hub, "machine": check_machine}
    if len(argv) != 1 or argv[0] not in checks:
        print("usage: healthcheck.py hub|machine", file=sys.stderr)
        return 2
    try:
        problem = checks[argv[0]]()
    except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        print(f"unhealthy: {problem}")
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
