"""The agent's asyncio driver: connect, serve, reconnect with backoff, or stop.

Everything protocol-shaped is decided by `AgentProtocol`; this module only
moves frames between it and a transport, runs operations as tasks, keeps the
reconnect schedule, and writes the audit trail. Transport, clock, sleep and
randomness are injected so the simulator can run it in virtual time.

Two modes: with a session id it serves that session's data connection (the
spec's legacy binding, and what each control-started child runs); without one
it is the machine's control daemon (browse, attach, activate, ...).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import json
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec

from tetherbed.agent.actions import Action, Close, Log, Ready, Revoked, Run, Send
from tetherbed.agent.audit.key import default_state_dir
from tetherbed.agent.audit.redaction import (
    AuditOp,
    audit_details,
    fatal_close_details,
    session_revoked_details,
)
from tetherbed.agent.audit.sink import AuditSink, NullAuditSink
from tetherbed.agent.backoff import Backoff
from tetherbed.agent.config import AgentConfig, Limits
from tetherbed.agent.exit_codes import AgentExit, exit_for_close
from tetherbed.agent.hardware import HardwareConfig, SerialPorts
from tetherbed.agent.hello import build_hello, default_machine_id
from tetherbed.agent.local_llm.service import StreamAbandoned
from tetherbed.agent.protocol import AgentProtocol
from tetherbed.runtime.clock import Clock, SystemClock
from tetherbed.runtime.event_log import EventLog, EventSink
from tetherbed.runtime.transport import Connector, MessageTransport, TransportClosed, UpgradeRefused
from tetherbed.wire import serial_io
from tetherbed.wire.backoff import HEALTHY_AFTER_SECONDS
from tetherbed.wire.catalog import STREAMING_REQUESTS
from tetherbed.wire.codes import CloseCode, ErrorCode, is_fatal_close
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, Capability, MessageType, Payload

log = logging.getLogger("tetherbed.agent")

Sleep = Callable[[float], Awaitable[None]]


class Operations(Protocol):
    """What runs admitted requests: data-plane or control-plane operations."""

    limits: Limits

    async def run(self, kind: MessageType, payload: Payload) -> tuple[MessageType, Payload]: ...


@dataclass(frozen=True, slots=True)
class Stop:
    """Why the agent stopped for good."""

    exit_code: AgentExit
    reason: str


@dataclass(slots=True)
class _Served:
    """How one connection ended."""

    handshake_done: bool = False
    healthy: bool = False
    stop: Stop | None = None
    close_code: int | None = None


class AgentRuntime:
    """Keeps one agent connected to its hub until a fatal event or `shutdown()`."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        connector: Connector,
        clock: Clock | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        new_id: Callable[[], str] | None = None,
        operations: Operations | None = None,
        healthy_after: float = HEALTHY_AFTER_SECONDS,
        audit: AuditSink | NullAuditSink | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.connector = connector
        self.backoff = Backoff(rng or random.Random())
        self.machine_id = config.machine_id or default_machine_id()
        self.hardware = HardwareConfig(
            serial_ports=tuple(config.serial_ports),
            usb_devices=tuple(config.usb_devices),
            gpio_lines=tuple(config.gpio_lines),
            serial_io=config.serial_io,
        )
        self._desktop: Any = None
        state_dir = Path(config.state_dir) if config.state_dir else default_state_dir()
        self.audit = audit or AuditSink(
            state_dir,
            config.session_id or "control",
            machine_id=self.machine_id,
            clock=self.clock,
            max_bytes=config.audit_max_bytes,
        )
        self.operations: Operations = operations or self._default_operations(state_dir)
        self._sleep = sleep
        self._new_id = new_id or (lambda: str(uuid.uuid4()))
        self._healthy_after = healthy_after
        self._shutdown = asyncio.Event()
        self._stop: Stop | None = None
        self._transport: MessageTransport | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_activity = self.clock.monotonic()
        self._journal: EventLog | None = None
        if events is None and config.journal:
            self._journal = EventLog(config.journal, self.clock.time)
            events = self._journal
        self._event: EventSink = events or _ignore
        #: Whether anything records events: the per-request payload digest is
        #: computed only then (hashing a 10 MiB FILE_WRITE takes milliseconds
        #: of the event loop's time).
        self._recording_events = events is not None
        self._attempts = 0
        #: The local LLM's models, as probed for the current connection's HELLO.
        self._llm_models: list[str] = []
        #: The most recent delays chosen between attempts, oldest first (bounded:
        #: an agent may run for months; the journal keeps every one).
        self.delays: collections.deque[float] = collections.deque(maxlen=256)

    @property
    def control_mode(self) -> bool:
        return self.config.session_id is None

    def _default_operations(self, state_dir: Path) -> Operations:
        if self.control_mode:
            from tetherbed.agent.control.controller import ControlOperations

            return ControlOperations(
                self.config,
                browse_roots=[Path(p) for p in self.config.browse_roots],
                state_dir=state_dir,
                clock=self.clock,
                machine_id=self.machine_id,
                audit=self._audit_control_event,
                idle_exit_seconds=self.config.child_idle_exit,
            )
        from tetherbed.agent.operations import DataOperations
        from tetherbed.agent.planted_defects import plant

        computer_use = self._computer_use()
        operations = DataOperations(
            root=self.config.root,
            clock=self.clock,
            computer_use=computer_use,
            temporaries_dir=state_dir / "temporaries",
            local_llm=self._local_llm(),
            recycle_bin=self.config.recycle_bin,
            serial_ports=SerialPorts(self.hardware) if self.config.serial_ports else None,
        )
        return plant(operations, self.config.defects)

    def _local_llm(self) -> Any:
        """The LLM backend given with --ollama-url, if any."""
        if not self.config.ollama_url:
            return None
        from tetherbed.agent.local_llm import HttpOllama, LocalLlm

        return LocalLlm(
            HttpOllama(self.config.ollama_url),
            clock=self.clock,
            allowed_models=self.config.ollama_models,
            idle_timeout=self.config.ollama_timeout,
        )

    def _computer_use(self) -> Any:
        """Computer use on the configured display, when one works (checked once)."""
        if self.config.display == "":
            return None
        from tetherbed.agent.computer_use.service import ComputerUse, probe

        info = probe(self.config.display)
        self._desktop = info
        if info is None:
            return None
        return ComputerUse(
            info.display,
            clock=self.clock,
            limits_provider=lambda: self.operations.limits,
            features=info.features,
            clipboard_read_opt_in=self.config.clipboard_read_own,
        )

    @property
    def url(self) -> str:
        base = self.config.hub_url.rstrip("/")
        if self.control_mode:
            return f"{base}/ws/local-executor"
        return f"{base}/ws/local-executor/{self.config.session_id}"

    def capabilities(self) -> list[Capability]:
        caps = [Capability.DIRECTORY_BROWSE] if self.control_mode else [Capability.FILES]
        if not self.control_mode and self.config.enable_shell:
            caps.append(Capability.SHELL)
        if not self.control_mode and self._desktop is not None:
            caps.append(Capability.COMPUTER_USE)
        if not self.control_mode and self._llm_models:
            caps.append(Capability.LOCAL_LLM)
        if not self.control_mode:
            caps += self.hardware.capabilities()  # type: ignore[arg-type]
        elif self.config.serial_ports:
            caps.append(Capability.HARDWARE_SERIAL)
        return caps

    async def run(self) -> Stop:
        """Connect and serve until a fatal close, a revocation, idling, or shutdown()."""
        watchdog = None
        if self.config.idle_exit:
            watchdog = asyncio.ensure_future(self._idle_watchdog(self.config.idle_exit))
        try:
            stop = await self._run()
        finally:
            if watchdog is not None:
                watchdog.cancel()
        self.audit.record(
            session_id=self.config.session_id,
            request_id=None,
            op="agent_stop",
            details={"exit_code": int(stop.exit_code), "reason": stop.reason[:200]},
            result="stopped",
        )
        self._event("stop", exit_code=int(stop.exit_code), reason=stop.reason)
        return stop

    async def _run(self) -> Stop:
        while True:
            served = await self._attempt()
            if served.stop is not None:
                late_4427 = "reconnect_after_4427" in self.config.defects  # a planted defect
                if "ignore_fatal_close" not in self.config.defects and not (
                    late_4427 and served.close_code == CloseCode.SESSION_TAKEN_OVER
                ):
                    return served.stop
                log.error("DEFECT ignore_fatal_close: reconnecting after %s", served.stop.reason)
            if self._shutdown.is_set():
                return self._stop or Stop(AgentExit.OK, "stopped")
            if served.healthy:
                self.backoff.reset()
            attempt = self.backoff.attempt
            delay = self.backoff.next_delay()
            if "reconnect_immediately" in self.config.defects:
                delay = 0.0
            self.delays.append(delay)
            self._event("backoff", attempt=attempt, delay=delay)
            log.info("reconnecting in %.2f s (attempt %d)", delay, self.backoff.attempt)
            await self._pause(delay)
            if self._shutdown.is_set():
                return self._stop or Stop(AgentExit.OK, "stopped")

    async def _pause(self, delay: float) -> None:
        """Sleep for `delay`, or less if shutdown() is called meanwhile."""
        sleeper = asyncio.ensure_future(self._sleep(delay))
        stopper = asyncio.ensure_future(self._shutdown.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            stopper.cancel()

    async def shutdown(self, stop: Stop | None = None) -> None:
        """Close the connection cleanly (1000) and stop reconnecting."""
        if self._shutdown.is_set():
            return
        self._stop = stop
        self._shutdown.set()
        for task in list(self._tasks):
            task.cancel()
        if self._transport is not None:
            with contextlib.suppress(Exception):
                await self._transport.close(CloseCode.NORMAL, "agent shutting down")

    async def close(self) -> None:
        """Release what the agent holds: children, the audit log, the journal."""
        closer = getattr(self.operations, "close", None)
        if closer is not None:
            await closer()
        await self.audit.close()
        if self._journal is not None:
            self._journal.close()

    async def _idle_watchdog(self, idle_exit: float) -> None:
        while not self._shutdown.is_set():
            idle_for = self.clock.monotonic() - self._last_activity
            if not self._tasks and idle_for >= idle_exit:
                log.info("no data request for %.0f s: stopping", idle_for)
                await self.shutdown(Stop(AgentExit.IDLE, f"idle for {idle_for:.0f} s"))
                return
            await self._sleep(max(idle_exit - idle_for, 0.05) if not self._tasks else 1.0)

    # --- one connection ----------------------------------------------------

    async def _attempt(self) -> _Served:
        headers = {"Authorization": f"Bearer {self.config.token}"}
        self._attempts += 1
        self._event("attempt", attempt=self._attempts)
        try:
            transport = await self.connector(self.url, headers)
        except UpgradeRefused as exc:
            if exc.status in (401, 403):
                return _Served(stop=Stop(AgentExit.AUTH_REFUSED, _refusal_text(exc)))
            log.warning("hub refused the upgrade: HTTP %d", exc.status)
            return _Served()
        except (OSError, TimeoutError) as exc:
            log.warning("cannot reach hub at %s: %s", self.url, exc)
            return _Served()
        except Exception as exc:  # a handshake the library rejected, etc.
            log.warning("connecting to %s failed: %r", self.url, exc)
            return _Served()
        if self._shutdown.is_set():
            with contextlib.suppress(Exception):
                await transport.close(CloseCode.NORMAL, "agent shutting down")
            return _Served()
        self._transport = transport
        try:
            served = await self._serve(transport)
        finally:
            self._transport = None
        self._event("lost", code=served.close_code, handshake=served.handshake_done)
        return served

    async def _serve(self, transport: MessageTransport) -> _Served:
        on_connect = getattr(self.operations, "on_connect", None)
        if "control_refs_survive_reconnect" in self.config.defects:  # a planted defect
            on_connect = None
        if on_connect is not None:
            on_connect()  # every browse reference dies with the old connection
        local_llm = getattr(self.operations, "local_llm", None)
        if local_llm is not None and not self.control_mode:
            # Every HELLO says what the backend has now (models come and go).
            self._llm_models = await local_llm.probe()
        hello = build_hello(
            machine_id=self.machine_id,
            shim_version=self.config.shim_version,
            capabilities=self.capabilities(),
            allowed_root=self.config.root if not self.control_mode else None,
            protocol_version=self.config.protocol_version,
            hardware_devices=self.hardware.devices(),
            local_llm_models=self._llm_models,
            screen_resolution=self._desktop.screen_resolution if self._desktop else None,
            computer_use_features=self._desktop.features if self._desktop else None,
        )
        protocol = AgentProtocol(
            hello=hello,
            local_limits=self.config.local_limits,
            clock=self.clock,
            new_id=self._new_id,
            session_id=self.config.session_id,
            audit_bytes=lambda: self.audit.size_bytes,
            strict_wire=self.config.strict_wire,
        )
        served = _Served()
        ready_at: float | None = None
        timer = asyncio.ensure_future(self._status_timer(protocol, transport, served))
        try:
            await transport.send(protocol.start().data)
            while served.stop is None:
                data = await transport.recv()
                actions = protocol.receive(data)
                for action in actions:
                    if isinstance(action, Ready):
                        ready_at = self.clock.monotonic()
                        served.handshake_done = True
                        self.operations.limits = protocol.limits
                        if "ignore_grants" in self.config.defects:  # a planted defect
                            protocol.granted = frozenset(map(str, self.capabilities()))
                        if "serial_without_negotiation" in self.config.defects:  # planted
                            protocol.granted |= {serial_io.CAPABILITY}
                        self._event("connected", conn=action.ack.connection_id)
                        log.info(
                            "connected to %s (protocol %s, granted %s)",
                            self.url,
                            action.version,
                            ",".join(action.ack.granted_capabilities),
                        )
                await self._perform(actions, protocol, transport, served)
        except TransportClosed as exc:
            served.close_code = exc.code
            if served.stop is None and is_fatal_close(exc.code):
                served.stop = Stop(exit_for_close(exc.code), _close_text(exc))
                self._event("fatal_close", code=exc.code)
                self._audit_event(
                    AuditOp.FATAL_CLOSE,
                    fatal_close_details(exc.code, exc.reason, exit_code=served.stop.exit_code),
                )
            elif served.stop is None and not self._shutdown.is_set():
                log.warning("connection lost: %s", exc)
        finally:
            protocol.connection_lost()
            timer.cancel()
            on_disconnect = getattr(self.operations, "on_disconnect", None)
            if on_disconnect is not None:
                await on_disconnect()
        if ready_at is not None and self.clock.monotonic() - ready_at >= self._healthy_after:
            served.healthy = True
        return served

    async def _perform(
        self,
        actions: list[Action],
        protocol: AgentProtocol,
        transport: MessageTransport,
        served: _Served,
    ) -> None:
        for action in actions:
            if isinstance(action, Send):
                await transport.send(action.data)
            elif isinstance(action, Run):
                self._last_activity = self.clock.monotonic()
                if self._recording_events:
                    self._event(
                        "exec",
                        kind=str(action.kind),
                        request_id=action.request_id,
                        digest=_digest(action.raw),
                    )
                task = asyncio.ensure_future(self._operate(action, protocol, transport, served))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif isinstance(action, Close):
                if action.fatal:
                    served.stop = Stop(AgentExit(action.exit_code), action.reason)
                    log.error("%s", action.reason)
                    self._event("fatal_close", code=action.code)
                    self._audit_event(
                        AuditOp.FATAL_CLOSE,
                        fatal_close_details(action.code, action.reason, exit_code=action.exit_code),
                    )
                with contextlib.suppress(Exception):
                    await transport.close(action.code, action.reason[:120])
                raise TransportClosed(action.code, action.reason)
            elif isinstance(action, Revoked):
                self._event("revoked", reason=action.reason, new_machine=action.new_shim_machine_id)
                log.error(
                    "SESSION_REVOKED: reason=%s new_shim_machine_id=%s",
                    action.reason,
                    action.new_shim_machine_id,
                )
                self._audit_event(
                    AuditOp.SESSION_REVOKED,
                    session_revoked_details(action.reason, action.new_shim_machine_id),
                )
            elif isinstance(action, Log):
                log.log(logging.getLevelName(action.level.upper()), "%s", action.message)

    async def _operate(
        self, run: Run, protocol: AgentProtocol, transport: MessageTransport, served: _Served
    ) -> None:
        result = "ok"
        try:
            if "lose_writes" in self.config.defects and run.kind is MessageType.FILE_WRITE:
                raise _LostWrite
            if run.kind in STREAMING_REQUESTS:

                async def emit(kind: MessageType, payload: Payload) -> None:
                    if not protocol.streaming(run.request_id):
                        raise StreamAbandoned(f"{run.kind} {run.request_id}: connection gone")
                    await self._perform(
                        protocol.emit(run.request_id, kind, payload), protocol, transport, served
                    )

                kind, payload = await self.operations.run(run.kind, run.payload, emit=emit)
            else:
                kind, payload = await self.operations.run(run.kind, run.payload)
            actions = protocol.complete(run.request_id, kind, payload)
            if "no_status_edge" in self.config.defects:  # a planted defect
                actions = actions[:1]
        except ProtocolError as exc:
            result = exc.code
            actions = protocol.fail(run.request_id, exc)
        except _LostWrite:  # the lose_writes defect: acknowledge, write nothing
            actions = protocol.complete(run.request_id, MessageType.ACK, Ack(ok=True))
        except (StreamAbandoned, TransportClosed):
            # The connection its frames were for is gone: nobody can be answered.
            self._audit_request(run, "abandoned")
            return
        except asyncio.CancelledError:
            self._audit_request(run, "cancelled")
            raise
        except Exception as exc:
            log.exception("operation %s failed", run.kind)
            result = ErrorCode.INTERNAL_ERROR
            actions = protocol.fail(
                run.request_id,
                ProtocolError(ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"),
            )
        self._last_activity = self.clock.monotonic()
        self._audit_request(run, str(result))
        with contextlib.suppress(TransportClosed):
            await self._perform(actions, protocol, transport, served)

    async def _status_timer(
        self, protocol: AgentProtocol, transport: MessageTransport, served: _Served
    ) -> None:
        with contextlib.suppress(TransportClosed):
            while True:
                deadline = protocol.next_deadline()
                wait = 1.0 if deadline is None else max(deadline - self.clock.monotonic(), 0.0)
                await self._sleep(wait)
                await self._perform(protocol.on_timer(), protocol, transport, served)

    # --- audit -------------------------------------------------------------

    def _audit_request(self, run: Run, result: str) -> None:
        self.audit.record(
            session_id=self.config.session_id,
            request_id=run.request_id,
            op=str(run.kind),
            details=audit_details(run.kind, run.payload),
            result=result,
        )

    def _audit_event(self, op: str, details: dict[str, Any]) -> None:
        self.audit.record(
            session_id=self.config.session_id,
            request_id=None,
            op=op,
            details=details,
            result="event",
        )

    def _audit_control_event(self, op: str, details: dict[str, Any]) -> None:
        self.audit.record(
            session_id=details.get("session_id"),
            request_id=None,
            op=op,
            details=details,
            result="event",
        )


class _LostWrite(Exception):
    """Raised by the lose_writes defect."""


def _ignore(event: str, **fields: Any) -> None:
    return None


def _digest(raw: msgspec.Raw | None) -> str | None:
    """A short digest of a request's payload bytes, to spot a re-execution."""
    if raw is None:
        return None
    return hashlib.sha256(memoryview(raw)).hexdigest()[:16]


def _close_text(exc: TransportClosed) -> str:
    name = CloseCode(exc.code).name if exc.code in CloseCode._value2member_map_ else str(exc.code)
    reason = exc.reason
    with contextlib.suppress(ValueError, TypeError):
        parsed = json.loads(reason)
        if isinstance(parsed, dict):
            reason = ", ".join(f"{k}={v}" for k, v in parsed.items())
    return f"hub closed the connection with {exc.code} {name}" + (f": {reason}" if reason else "")


def _refusal_text(exc: UpgradeRefused) -> str:
    detail = exc.body.decode("utf-8", "replace")[:200] if exc.body else ""
    return f"hub refused the token (HTTP {exc.status}) {detail}".rstrip()
