"""The connection's state machine, sans-I/O: one attempt, permission, pause, generations.

States: `idle` → `connecting` → `ready` (a frame of the current generation exists)
→ `disconnected`; a refused attempt ends in `failed`. A display change starts a new
generation and returns to `connecting` until its first frame arrives.
"""

from __future__ import annotations

from dataclasses import dataclass

from tetherbed.agent.native.errors import Code, NativeError


@dataclass(slots=True)
class Session:
    state: str = "idle"
    attempted: bool = False
    device: str | None = None
    mode: str = "observe"
    display_index: int = 0
    decode_path: str = "browser"
    decoder: str = "auto"
    generation: int = 0
    control_enabled: bool = False
    human_paused: bool = False
    last_error: str | None = None

    def begin(
        self, *, device: str, mode: str, display: int, decode_path: str, decoder: str
    ) -> None:
        if self.attempted:
            raise NativeError(
                Code.ALREADY_CONNECTED,
                "each process accepts one connection attempt; start a new process",
            )
        self.attempted = True
        self.device, self.mode, self.display_index = device, mode, display
        self.decode_path, self.decoder = decode_path, decoder
        self.control_enabled = mode == "control"
        self.state = "connecting"
        self.generation = 1

    def fail(self, code: Code) -> None:
        self.state = "failed"
        self.last_error = str(code)

    @property
    def connected(self) -> bool:
        return self.state in ("connecting", "ready")

    def require_connected(self) -> None:
        if not self.connected:
            raise NativeError(Code.NOT_CONNECTED, f"the session is {self.state}")

    def frame_arrived(self, generation: int) -> None:
        if self.state == "connecting" and generation == self.generation:
            self.state = "ready"

    def change_display(self, index: int) -> int:
        self.require_connected()
        self.display_index = index
        self.generation += 1
        self.state = "connecting"
        return self.generation

    @property
    def control_allowed(self) -> bool:
        return (
            self.connected
            and self.mode == "control"
            and self.control_enabled
            and not self.human_paused
        )

    def require_control(self) -> None:
        self.require_connected()
        if self.mode != "control":
            raise NativeError(Code.CONTROL_DENIED, "the session was opened to observe")
        if self.human_paused:
            raise NativeError(Code.HUMAN_PAUSED, "a person paused agent control")
        if not self.control_enabled:
            raise NativeError(Code.CONTROL_DENIED, "control is disabled")

    def set_control(self, enabled: bool) -> None:
        self.require_connected()
        if enabled and self.mode != "control":
            raise NativeError(Code.CONTROL_DENIED, "observe-only sessions cannot enable control")
        if enabled and self.human_paused:
            raise NativeError(Code.HUMAN_PAUSED, "a person paused agent control")
        self.control_enabled = enabled

    def pause(self) -> None:
        self.require_connected()
        self.human_paused = True

    def resume(self) -> None:
        self.require_connected()
        self.human_paused = False

    def disconnect(self) -> None:
        if self.connected:
            self.state = "disconnected"
