"""The settings page (§7) in a real headless Chromium against a real hub and agent.

Create a key in the connect dialog, enroll an agent with the key the page
shows, see it come online (the dialog closes by itself), rename it, delete it
and see its stream kicked (the agent's token is dead: it stops). Screenshots
of the page are kept as test artifacts in `test-artifacts/browser/` (or under
$TETHERBED_ARTIFACTS), where a CI job can collect them; their paths are printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path

import pytest

from tetherbed.launch import enroll_dsh_agent, start_dsh_agent, start_hub

from .chromium import Chromium

pytestmark = pytest.mark.e2e


#: Where the screenshots stay after the run (pytest's tmp_path is removed).
ARTIFACTS = Path(
    os.environ.get("TETHERBED_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")
)


def _artifact_dir(tmp_path: Path) -> Path:
    """A folder of this run's own, so parallel workers never share a file."""
    folder = ARTIFACTS / "browser" / tmp_path.name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def _settings_flow(tmp_path: Path) -> dict[str, Path]:
    hub = start_hub(tmp_path / "state")
    browser = Chromium()
    agent = None
    shots: dict[str, Path] = {}
    artifacts = _artifact_dir(tmp_path)
    try:
        token = hub.token("alice", "client")
        await browser.start()
        await browser.goto(f"{hub.http_url}/api/dsh-computers/settings#token={token}")
        await browser.wait_for("!!document.querySelector('[data-dshc=empty]')")
        # the token left the address bar
        assert "token" not in await browser.evaluate("location.href")

        # create a key: the connect dialog, Linux tab
        await browser.click("[data-dshc=connect]")
        await browser.wait_for("document.querySelector('[data-dshc=command]')?.dataset.key")
        first_key = await browser.evaluate(
            "document.querySelector('[data-dshc=command]').dataset.key"
        )
        await browser.click("[data-dshc=tab-linux]")
        key = await browser.wait_for(
            "(() => { const k = document.querySelector('[data-dshc=command]').dataset.key;"
            f" return k && k !== {json.dumps(first_key)} ? k : null; }})()"
        )
        command = await browser.evaluate(
            "document.querySelector('[data-dshc=command]').textContent"
        )
        assert command == f"curl -fsSL '{hub.http_url}/api/dsh-computers/join.sh?key={key}' | sh"
        assert (
            await browser.evaluate("document.querySelector('[data-dshc=raw-key]').textContent")
            == key
        )
        shots["connect dialog"] = await browser.screenshot(artifacts / "dsh-connect-dialog.png")

        # enroll an agent with the key the page shows; the dialog closes on its own
        home = tmp_path / "agent-home"
        enroll_dsh_agent(hub.http_url, key, home, name="build-box")
        agent = start_dsh_agent(home, name="build-box")
        await browser.wait_for("!document.querySelector('[data-dshc=overlay]')", timeout=20)
        await browser.wait_for(
            "!!document.querySelector('[data-computer-id][data-online=true]')", timeout=20
        )
        row = await browser.evaluate(
            "(() => { const r = document.querySelector('[data-computer-id]');"
            " const text = (s) => r.querySelector(s).textContent;"
            " return {id: r.dataset.computerId, name: text('[data-dshc=name]'),"
            " status: text('[data-dshc=status]')}; })()"
        )
        assert row["name"] == "build-box" and row["status"] == "Online"
        computer_id = row["id"]

        # rename through the gear dialog: the agent gets the config event
        await browser.click(f"[data-dshc=rename-{computer_id}]")
        await browser.wait_for("document.activeElement?.dataset.dshc === 'rename-input'")
        await browser.type("Desk Mac mini")  # the field's text is selected: this replaces it
        await browser.click("[data-dshc=rename-save]")
        await browser.wait_for(
            "document.querySelector('[data-dshc=name]')?.textContent === 'Desk Mac mini'"
        )
        config = home / "config.json"
        deadline = time.monotonic() + 10
        while json.loads(config.read_text())["name"] != "Desk Mac mini":
            assert time.monotonic() < deadline, "the agent never got the new name"
            await asyncio.sleep(0.05)
        shots["computers"] = await browser.screenshot(artifacts / "dsh-settings.png")

        # Escape closes a dialog without doing anything
        await browser.click(f"[data-dshc=delete-{computer_id}]")
        await browser.wait_for("!!document.querySelector('[data-dshc=confirm]')")
        await browser.press("Escape", "Escape", 27)
        await browser.wait_for("!document.querySelector('[data-dshc=overlay]')")

        # delete with confirm: the row goes, the agent's stream is kicked, it stops
        await browser.click(f"[data-dshc=delete-{computer_id}]")
        await browser.click("[data-dshc=confirm]")
        await browser.wait_for("!!document.querySelector('[data-dshc=empty]')")
        code = await asyncio.to_thread(agent.wait, 15)
        assert code == 3, agent.log()
        assert "stream lost (the hub ended the stream)" in agent.log()
        assert "refused this computer's token" in agent.log()
        errors = [line for line in browser.console if "exception" in line]
        assert not errors, errors
        return shots
    finally:
        await browser.close()
        assert browser.process.poll() is not None
        if agent is not None:
            agent.stop()
        hub.stop()


def test_settings_page_key_enroll_online_rename_delete(tmp_path: Path) -> None:
    shots = asyncio.run(_settings_flow(tmp_path))
    for what, path in shots.items():
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert (width, height) == (1280, 860)
        print(f"screenshot of the settings page ({what}): {path}")


def test_settings_page_asks_for_a_token(tmp_path: Path) -> None:
    async def flow() -> str:
        hub = start_hub(tmp_path / "state")
        browser = Chromium()
        try:
            token = hub.token("alice", "client")
            await browser.start()
            await browser.goto(f"{hub.http_url}/api/dsh-computers/settings")
            await browser.wait_for("!!document.querySelector('[data-dshc=sign-in]')")
            await browser.click("[data-dshc=token]")
            await browser.type("tb_c_wrong")
            await browser.click("[data-dshc=sign-in-submit]")
            await browser.wait_for("!!document.querySelector('[data-dshc=rejected]')")
            await browser.click("[data-dshc=token]")
            await browser.type(token)
            await browser.click("[data-dshc=sign-in-submit]")
            await browser.wait_for("!!document.querySelector('[data-dshc=empty]')")
            return await browser.evaluate("document.querySelector('h1').textContent")
        finally:
            await browser.close()
            hub.stop()

    assert re.fullmatch("Computers", asyncio.run(flow()))
