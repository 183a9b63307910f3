"""`service install|uninstall|start|stop|restart|status` (§6 "Service").

Linux: a systemd user unit `~/.config/systemd/user/dsh-computers-agent.service`
(`systemctl --user daemon-reload`, `enable --now`). Where systemd is not
there (containers, minimal hosts) the service falls back to `nohup … run &`:
a detached process in its own session, its pid in `agent.pid`. macOS: a
launchd user agent `~/Library/LaunchAgents/com.dsh.computers.agent.plist`
with RunAtLoad and KeepAlive. Windows: the manual command is printed (v1).

`program` is how to start this agent again (`python3 agent.pyz`, or
`python -m tetherbed agent --transport sse`); the service runs
`program + ["run", "--log-file", …]`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

from tetherbed.wire.dsh import constants as C

#: `nohup` forces the detached-process fallback even where systemd exists
#: (tests, containers that have systemctl but no user session).
SERVICE_ENV = "DSH_COMPUTERS_SERVICE"
PID_FILE = "agent.pid"
#: Output of a nohup-started agent that did not reach its own log (a crash).
OUT_FILE = "agent.out"
MODE_FILE = "service-mode"


class ServiceError(RuntimeError):
    """The service could not be installed or controlled; the message says why."""


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def systemd_user_available() -> bool:
    if sys.platform != "linux" or shutil.which("systemctl") is None:
        return False
    probe = _run(["systemctl", "--user", "show-environment"])
    return probe.returncode == 0


class Service:
    def __init__(self, home: Path, program: list[str]) -> None:
        self.home = home
        self.program = program

    def run_argv(self) -> list[str]:
        return [*self.program, "run", "--log-file", str(self.home / C.AGENT_LOG_FILE)]

    def manual_command(self) -> str:
        joined = " ".join(shlex.quote(p) for p in [*self.program, "run"])
        return f"nohup {joined} >/dev/null 2>&1 &"

    @property
    def mode(self) -> str:
        try:
            return (self.home / MODE_FILE).read_text().strip()
        except OSError:
            return ""

    # --- install -----------------------------------------------------------

    def install(self) -> str:
        forced = os.environ.get(SERVICE_ENV, "")
        if forced == "nohup":
            mode = "nohup"
        elif sys.platform == "darwin":
            mode = self._install_launchd()
        elif sys.platform == "win32":
            raise ServiceError(
                f"no service on Windows in v1; run it yourself: {self.manual_command()}"
            )
        elif systemd_user_available():
            mode = self._install_systemd()
        else:
            mode = "nohup"
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / MODE_FILE).write_text(mode + "\n")
        return mode

    def _systemd_unit(self) -> Path:
        return Path.home() / ".config" / "systemd" / "user" / C.SYSTEMD_UNIT

    def _install_systemd(self) -> str:
        unit = self._systemd_unit()
        unit.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join(shlex.quote(p) for p in self.run_argv())
        unit.write_text(
            "[Unit]\n"
            "Description=Tetherbed dsh-computers agent\n"
            "After=network-online.target\n\n"
            "[Service]\n"
            f"Environment={C.AGENT_HOME_ENV}={self.home}\n"
            f"ExecStart={command}\n"
            "Restart=always\n"
            "RestartSec=5\n\n"
            "[Install]\n"
            "WantedBy=default.target\n"
        )
        reload = _run(["systemctl", "--user", "daemon-reload"])
        if reload.returncode != 0:
            raise ServiceError(f"systemctl --user daemon-reload failed: {reload.stderr.strip()}")
        return "systemd"

    def _plist(self) -> Path:
        return Path.home() / "Library" / "LaunchAgents" / f"{C.LAUNCHD_LABEL}.plist"

    def _install_launchd(self) -> str:
        plist = self._plist()
        plist.parent.mkdir(parents=True, exist_ok=True)
        arguments = "".join(f"<string>{escape(a)}</string>" for a in self.run_argv())
        out = escape(str(self.home / OUT_FILE))
        plist.write_text(
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" '
            '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
            '<plist version="1.0"><dict>'
            f"<key>Label</key><string>{C.LAUNCHD_LABEL}</string>"
            f"<key>ProgramArguments</key><array>{arguments}</array>"
            "<key>EnvironmentVariables</key><dict>"
            f"<key>{C.AGENT_HOME_ENV}</key><string>{escape(str(self.home))}</string></dict>"
            "<key>RunAtLoad</key><true/><key>KeepAlive</key><true/>"
            f"<key>StandardOutPath</key><string>{out}</string>"
            f"<key>StandardErrorPath</key><string>{out}</string>"
            "</dict></plist>\n"
        )
        return "launchd"

    def uninstall(self) -> None:
        with contextlib.suppress(ServiceError):
            self.stop()
        mode = self.mode
        if mode == "systemd":
            _run(["systemctl", "--user", "disable", C.SYSTEMD_UNIT])
            self._systemd_unit().unlink(missing_ok=True)
            _run(["systemctl", "--user", "daemon-reload"])
        elif mode == "launchd":
            self._plist().unlink(missing_ok=True)
        (self.home / MODE_FILE).unlink(missing_ok=True)

    # --- control -----------------------------------------------------------

    def start(self) -> str:
        mode = self.mode
        if mode == "systemd":
            started = _run(["systemctl", "--user", "enable", "--now", C.SYSTEMD_UNIT])
            if started.returncode != 0:
                raise ServiceError(f"systemctl --user enable --now: {started.stderr.strip()}")
            return "started with systemd (user unit " + C.SYSTEMD_UNIT + ")"
        if mode == "launchd":
            loaded = _run(["launchctl", "load", "-w", str(self._plist())])
            if loaded.returncode != 0:
                raise ServiceError(f"launchctl load: {loaded.stderr.strip()}")
            return "started with launchd (" + C.LAUNCHD_LABEL + ")"
        if mode == "nohup":
            return self._start_detached()
        raise ServiceError("the service is not installed: run `service install` first")

    def _start_detached(self) -> str:
        pid = self._pid()
        if pid is not None:
            return f"already running (pid {pid})"
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / OUT_FILE, "ab") as out:
            process = subprocess.Popen(
                self.run_argv(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                close_fds=True,
                env={**os.environ, C.AGENT_HOME_ENV: str(self.home)},
            )
        (self.home / PID_FILE).write_text(f"{process.pid}\n")
        time.sleep(0.5)
        if process.poll() is not None:
            raise ServiceError(
                f"the agent exited at once (status {process.returncode}); "
                f"see {self.home / OUT_FILE}"
            )
        return f"started in the background with nohup (pid {process.pid}; no systemd here)"

    def _pid(self) -> int | None:
        try:
            pid = int((self.home / PID_FILE).read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def stop(self) -> str:
        mode = self.mode
        if mode == "systemd":
            _run(["systemctl", "--user", "stop", C.SYSTEMD_UNIT])
            return "stopped"
        if mode == "launchd":
            _run(["launchctl", "unload", "-w", str(self._plist())])
            return "stopped"
        pid = self._pid()
        if pid is None:
            return "not running"
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if self._pid() is None:
                break
            time.sleep(0.1)
        (self.home / PID_FILE).unlink(missing_ok=True)
        return f"stopped (pid {pid})"

    def restart(self) -> str:
        self.stop()
        return self.start()

    def status(self) -> str:
        mode = self.mode or "not installed"
        if mode == "systemd":
            active = _run(["systemctl", "--user", "is-active", C.SYSTEMD_UNIT]).stdout.strip()
            return f"systemd user unit {C.SYSTEMD_UNIT}: {active or 'unknown'}"
        if mode == "launchd":
            listed = _run(["launchctl", "list", C.LAUNCHD_LABEL]).returncode == 0
            return f"launchd {C.LAUNCHD_LABEL}: {'loaded' if listed else 'not loaded'}"
        if mode == "nohup":
            pid = self._pid()
            return f"nohup: {'running, pid ' + str(pid) if pid else 'not running'}"
        return "service: not installed"
