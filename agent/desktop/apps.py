"""Launchable desktop apps: XDG .desktop entries plus a configured list.

Only listed apps can be launched - APP_LAUNCH must not become a way to run an
arbitrary command on an agent that was not started with --enable-shell.
Entries that need a terminal (Terminal=true), are hidden (NoDisplay/Hidden)
or whose program is missing (TryExec/Exec not on PATH) are left out: they
could not put a window on the display.
"""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tetherbed.agent.desktop.errors import DependencyMissing, DesktopError

#: Exec field codes (Desktop Entry spec) dropped from the command line.
_FIELD_CODES = {"%f", "%F", "%u", "%U", "%d", "%D", "%n", "%N", "%i", "%c", "%k", "%v", "%m"}


@dataclass(frozen=True, slots=True)
class AppEntry:
    """One launchable app. `argv` is the command; `app_id` the .desktop basename."""

    name: str
    argv: tuple[str, ...]
    app_id: str = ""

    @property
    def exec(self) -> str:
        return shlex.join(self.argv)


class UnknownApp(DesktopError):
    """No listed app has that name or id."""


def xdg_application_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """$XDG_DATA_HOME and $XDG_DATA_DIRS, each + /applications, in priority order."""
    env = os.environ if env is None else env
    home = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".local/share")
    dirs = env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    return [Path(d) / "applications" for d in [home, *dirs.split(":")] if d]


def parse_desktop_file(path: Path) -> AppEntry | None:
    """The app a .desktop file describes, or None if it cannot show a window."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    if not parser.has_section("Desktop Entry"):
        return None
    entry = parser["Desktop Entry"]
    if entry.get("Type") != "Application":
        return None
    if any(entry.get(k, "false").lower() == "true" for k in ("NoDisplay", "Hidden", "Terminal")):
        return None
    try_exec = entry.get("TryExec")
    if try_exec and shutil.which(try_exec) is None:
        return None
    argv = exec_argv(entry.get("Exec", ""))
    if not argv or shutil.which(argv[0]) is None:
        return None
    return AppEntry(name=entry.get("Name", path.stem), argv=tuple(argv), app_id=path.stem)


def exec_argv(line: str) -> list[str]:
    """An Exec= value as argv: field codes dropped, "%%" unescaped."""
    try:
        words = shlex.split(line)
    except ValueError:
        return []
    return [w.replace("%%", "%") for w in words if w not in _FIELD_CODES]


class AppCatalog:
    """The apps an agent offers: configured ones first, then .desktop entries."""

    def __init__(
        self,
        configured: Sequence[AppEntry] = (),
        *,
        search_dirs: Iterable[Path] | None = None,
        include_desktop_files: bool = True,
    ) -> None:
        self._configured = list(configured)
        self._dirs = list(search_dirs) if search_dirs is not None else xdg_application_dirs()
        self._include_desktop_files = include_desktop_files

    def list(self) -> list[AppEntry]:
        apps = list(self._configured)
        seen = {a.app_id or a.name for a in apps}
        if self._include_desktop_files:
            for directory in self._dirs:
                for path in sorted(directory.glob("*.desktop")) if directory.is_dir() else []:
                    app = parse_desktop_file(path)
                    if app is not None and app.app_id not in seen:
                        seen.add(app.app_id)
                        apps.append(app)
        return apps

    def find(self, name: str) -> AppEntry:
        """By app id or name, case-insensitively."""
        wanted = name.casefold()
        apps = self.list()
        for app in apps:
            if wanted in (app.app_id.casefold(), app.name.casefold()):
                return app
        raise UnknownApp(f"no app named {name!r}")


def launch(app: AppEntry, display: str, args: Sequence[str] = ()) -> int:
    """Start `app` on `display` in its own session; returns its PID.

    The child is reaped by a daemon thread so it never lingers as a zombie.
    """
    program = shutil.which(app.argv[0])
    if program is None:
        raise DependencyMissing(f"{app.argv[0]} is not installed")
    env = {**os.environ, "DISPLAY": display}
    proc = subprocess.Popen(
        [program, *app.argv[1:], *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    threading.Thread(target=proc.wait, daemon=True, name=f"reap-{proc.pid}").start()
    return proc.pid
