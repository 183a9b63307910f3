"""Small helpers shared by the desktop tests."""

from __future__ import annotations

from typing import Any

from tests.desktop.conftest import ProbeApp


def last_text(app: ProbeApp) -> str:
    texts = app.events.of_type("text")
    return texts[-1]["text"] if texts else ""


def clear_entry(driver: Any, app: ProbeApp) -> None:
    """Focus the probe app's entry and empty it (select all, Delete)."""
    driver.click(*app.center("entry"))
    if last_text(app):
        mark = app.events.mark()
        driver.key("ctrl+slash Delete")
        app.events.wait_for(lambda e: e["type"] == "text" and e["text"] == "", since=mark)


def near(point: list[int] | tuple[int, int], target: tuple[int, int], tolerance: int) -> bool:
    return abs(point[0] - target[0]) <= tolerance and abs(point[1] - target[1]) <= tolerance
