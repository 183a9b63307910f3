"""The aiohttp driver of the dsh-computers hub: routes in, core actions out.

Mounted on the hub's own application and port (`mount`). Three sets of
routes:

- the agent API (§3, §11) under `/api/dsh-computers/agent/*`: token-
  authenticated, never behind the browser gate;
- the browser API (§4, §10.5) and the settings page (§7) under
  `/api/dsh-computers/*`: behind the hub's client authentication (a client
  bearer token), which is the spec's "host request gate" — a refusal is 401
  `{"error": "unadmitted"}`; `join.sh`, `join.ps1`, `agent.pyz`, `health`
  and the page's static files are public, as the spec has them;
- the model tools (§5, §11) on the hub's client API, `/v1/computers/*`.

Each SSE stream is one handler that drains a queue of bytes the core pushed;
a write that fails or does not finish within a heartbeat ends it, which is
how a half-dead peer is found (plus TCP_USER_TIMEOUT, so the kernel gives up
on unacknowledged data in that time too). Whether a quiet stream's peer has
gone is also checked before every state read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import secrets
import socket
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from tetherbed.agent.dsh.bundle import agent_bundle, bundle_etag
from tetherbed.hub.admission import Refusal, admit_client
from tetherbed.hub.dsh import persistence, public_url, tool_calls, tools
from tetherbed.hub.dsh.actions import (
    DshAction,
    End,
    Output,
    Persist,
    Push,
    Settled,
    Stream,
    ToolError,
)
from tetherbed.hub.dsh.config import DshConfig
from tetherbed.hub.dsh.core import Answer, DshHubCore
from tetherbed.hub.dsh.join import join_ps1, join_sh
from tetherbed.hub.dsh.records import Computer
from tetherbed.hub.dsh.runtime_manager import RuntimeManager, RuntimeRefused
from tetherbed.hub.store import HubStore
from tetherbed.runtime.clock import Clock, SystemClock
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.credentials import bearer, digest, is_credential
from tetherbed.wire.dsh.sse import encode_retry

log = logging.getLogger("tetherbed.hub.dsh")

T = C.ToolErrorCode
NO_STORE = {"Cache-Control": "no-store"}
NDJSON = "application/x-ndjson"
#: How often a waiting tool call checks that its caller is still there.
CALLER_CHECK_S = 1.0
UI_FILES = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_END = object()


class BodyTooLarge(Exception):
    pass


def _json(answer: Answer) -> web.Response:
    return web.json_response(answer.body, status=answer.status, headers=NO_STORE)


def _client_error(status: int, code: str, message: str, details: Any = None) -> web.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return web.json_response({"error": error}, status=status, headers=NO_STORE)


def _tool_error(error: ToolError) -> web.Response:
    return _client_error(error.status, error.code, error.message, error.details)


async def read_body(request: web.Request, limit: int) -> bytes:
    """The body, refused before it is read when it is over `limit`."""
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge(f"the body is over the {limit}-byte limit")
    data = bytearray()
    while True:
        chunk = await request.content.read(65536)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise BodyTooLarge(f"the body is over the {limit}-byte limit")


class _Channel:
    """One SSE response and the bytes queued for it."""

    def __init__(self, request: web.Request, response: web.StreamResponse) -> None:
        self.request = request
        self.response = response
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.ended = False

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.queue.put_nowait(_END)

    def peer_gone(self) -> bool:
        transport = self.request.transport
        return transport is None or transport.is_closing()


class DshServer:
    def __init__(
        self,
        store: HubStore,
        config: DshConfig,
        *,
        clock: Clock | None = None,
        state_dir: Path | None = None,
        entropy: Callable[[int], bytes] | None = None,
    ) -> None:
        """`entropy` draws keys, tokens and ids (default: `secrets`; the
        simulator's is seeded, so a run's history repeats)."""
        self.store = store
        self.config = config
        computers, keys = persistence.load(store)
        self.core = DshHubCore(
            config,
            clock or SystemClock(),
            entropy=entropy or secrets.token_bytes,
            computers=computers,
            keys=keys,
        )
        self._channels: dict[Stream, _Channel] = {}
        self._waiters: dict[str, asyncio.Queue[Output | Settled]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._forwarded = "install_url_from_forwarded_header" in config.defects
        self.runtime = RuntimeManager(state_dir) if config.serves_runtime else None

    # === mounting ============================================================

    def mount(self, app: web.Application) -> None:
        u = C.url
        routes = [
            web.get(u(C.Route.STATE), self._state),
            web.get(u(C.Route.HEALTH), self._health),
            web.get(u(C.Route.SETTINGS_PAGE), self._settings_page),
            web.get(u(C.Route.UI_ASSETS) + "/{name}", self._ui_asset),
        ]
        if self.config.serves_hub:
            routes += [
                web.post(u(C.Route.ENROLL), self._enroll),
                web.get(u(C.Route.EVENTS), self._events),
                web.post(u(C.Route.RESULTS), self._results),
                web.post(u(C.Route.RESULTS_CHUNK), self._chunk),
                web.post(u(C.Route.HEARTBEAT), self._heartbeat),
                web.post(u(C.Route.FS_RESULT), self._fs_result),
                web.post(u(C.Route.KEYS), self._keys),
                web.get(u(C.Route.KEY_STATUS), self._key_status),
                web.post(u(C.Route.DELETE), self._delete),
                web.post(u(C.Route.RENAME), self._rename),
                web.get(u(C.Route.JOIN_SH), self._join_sh),
                web.get(u(C.Route.JOIN_PS1), self._join_ps1),
                web.get(u(C.Route.AGENT_PYZ), self._agent_pyz),
                web.get(u(C.Route.AGENT_MJS), self._agent_mjs),
                web.get("/v1/computers/tools", self._tool_list),
                web.post("/v1/computers/tools/{name}", self._tool_call),
                web.post("/v1/computers/executions/{request_id}/cancel", self._cancel),
                web.get("/v1/computers/prompt", self._prompt),
            ]
        if self.runtime is not None:
            routes += [
                web.get(u(C.Route.RUNTIME), self._runtime_status),
                web.post(u(C.Route.RUNTIME_CONNECT), self._runtime_connect),
                web.post(u(C.Route.RUNTIME_ENABLE), self._runtime_enable),
                web.post(u(C.Route.RUNTIME_DISCONNECT), self._runtime_disconnect),
            ]
        app.add_routes(routes)
        app.on_startup.append(self._on_startup)
        app.on_shutdown.append(self._on_shutdown)

    async def _on_startup(self, app: web.Application) -> None:
        if self.runtime is not None:
            self.runtime.start()

    async def _on_shutdown(self, app: web.Application) -> None:
        self._apply(self.core.shutdown())
        if self._timer is not None:
            self._timer.cancel()
        if self.runtime is not None:
            await self.runtime.stop()

    # === carrying out actions ===============================================

    def _apply(self, actions: list[DshAction]) -> None:
        for action in actions:
            if isinstance(action, Push):
                channel = self._channels.get(action.stream)
                if channel is not None and not channel.ended:
                    channel.queue.put_nowait(action.data)
            elif isinstance(action, End):
                channel = self._channels.get(action.stream)
                if channel is not None:
                    log.info("ending stream of %s: %s", action.stream.computer_id, action.reason)
                    channel.end()
            elif isinstance(action, Persist):
                persistence.write(self.store, action.changes)
            elif isinstance(action, Output | Settled):
                waiter = self._waiters.get(action.request_id)
                if waiter is not None:
                    waiter.put_nowait(action)
        self._rearm()

    def _rearm(self) -> None:
        deadline = self.core.next_deadline()
        self.core.timers.dirty = False
        if deadline is None or (self._timer_at is not None and self._timer_at <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        delay = max(0.0, deadline - self.core.clock.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        self._apply(self.core.on_timer())

    def _sweep(self) -> None:
        """Streams whose peer went away since the last write are closed now."""
        for stream, channel in list(self._channels.items()):
            if not channel.ended and channel.peer_gone():
                self._apply(self.core.stream_closed(stream))
                channel.end()

    def server_url(self, request: web.Request) -> str:
        if self.config.public_url:
            return self.config.public_url
        tls = request.transport is not None and bool(request.transport.get_extra_info("sslcontext"))
        if self._forwarded:
            found = public_url.from_headers(request.headers, "https" if tls else "http")
            if found:
                return found
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        return public_url.socket_base(sockname, tls)

    # === agent routes =======================================================

    async def _body(self, request: web.Request, limit: int) -> Any:
        raw = await read_body(request, limit)
        if not raw.strip():
            return None
        return json.loads(raw)

    async def _agent_route(self, request: web.Request, limit: int, handle: Any) -> web.Response:
        try:
            value = await self._body(request, limit)
        except BodyTooLarge as exc:
            return _json(Answer(413, {"error": C.ErrorCode.TOO_LARGE, "message": str(exc)}))
        except (ValueError, UnicodeDecodeError) as exc:
            return _json(
                Answer(400, {"error": C.ErrorCode.BAD_REQUEST, "message": f"not JSON: {exc}"})
            )
        answer, actions = handle(value)
        self._apply(actions)
        return _json(answer)

    async def _enroll(self, request: web.Request) -> web.Response:
        url = self.server_url(request)
        return await self._agent_route(
            request, C.ENROLL_BODY_LIMIT, lambda value: self.core.enroll(value, url)
        )

    def _token(self, request: web.Request) -> str | None:
        return bearer(request.headers.get("Authorization"))

    async def _results(self, request: web.Request) -> web.Response:
        token = self._token(request)
        return await self._agent_route(
            request, C.RESULTS_BODY_LIMIT, lambda value: self.core.result(token, value)
        )

    async def _chunk(self, request: web.Request) -> web.Response:
        token = self._token(request)
        return await self._agent_route(
            request, C.CHUNK_BODY_LIMIT, lambda value: self.core.chunk(token, value)
        )

    async def _heartbeat(self, request: web.Request) -> web.Response:
        token = self._token(request)
        return await self._agent_route(
            request, C.HEARTBEAT_BODY_LIMIT, lambda value: self.core.heartbeat(token, value)
        )

    async def _fs_result(self, request: web.Request) -> web.Response:
        token = self._token(request)
        return await self._agent_route(
            request, C.FS_RESULT_BODY_LIMIT, lambda value: self.core.fs_result(token, value)
        )

    async def _events(self, request: web.Request) -> web.StreamResponse:
        outcome, actions = self.core.open_stream(self._token(request))
        if isinstance(outcome, Answer):
            return _json(outcome)
        stream = outcome
        response = web.StreamResponse(status=200, headers=C.SSE_HEADERS)
        channel = _Channel(request, response)
        self._channels[stream] = channel
        try:
            await response.prepare(request)
            self._user_timeout(request)
            await response.write(encode_retry(C.SSE_RETRY_MS))
            self._apply(actions)
            await self._pump(channel)
        except (ConnectionError, RuntimeError, TimeoutError):
            pass  # the peer is gone or stopped reading: the stream is over
        finally:
            self._channels.pop(stream, None)
            self._apply(self.core.stream_closed(stream))
            response.force_close()
        return response

    def _user_timeout(self, request: web.Request) -> None:
        """Have the kernel give up on unacknowledged data after one heartbeat."""
        option = getattr(socket, "TCP_USER_TIMEOUT", None)
        sock = request.transport.get_extra_info("socket") if request.transport else None
        if option is None or sock is None:
            return
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, option, self.config.heartbeat_ms)

    async def _pump(self, channel: _Channel) -> None:
        timeout = self.config.heartbeat_ms / 1000
        while True:
            item = await channel.queue.get()
            if item is _END:
                return
            await asyncio.wait_for(channel.response.write(item), timeout)

    # === browser routes =====================================================

    def _admit(self, request: web.Request) -> str | web.Response:
        user = admit_client(self.store, bearer(request.headers.get("Authorization")))
        if isinstance(user, Refusal):
            body = {"error": C.ErrorCode.UNADMITTED, "message": user.message}
            return web.json_response(body, status=user.status, headers=NO_STORE)
        return user

    async def _browser_body(self, request: web.Request) -> Any:
        try:
            return await self._body(request, C.BROWSER_BODY_LIMIT)
        except BodyTooLarge as exc:
            return _json(Answer(413, {"error": C.ErrorCode.TOO_LARGE, "message": str(exc)}))
        except (ValueError, UnicodeDecodeError) as exc:
            return _json(
                Answer(400, {"error": C.ErrorCode.BAD_REQUEST, "message": f"not JSON: {exc}"})
            )

    async def _state(self, request: web.Request) -> web.Response:
        user = self._admit(request)
        if isinstance(user, web.Response):
            return user
        self._sweep()
        if not self.config.serves_hub:
            body = {
                "version": C.STATE_VERSION,
                "serverUrl": self.server_url(request),
                "heartbeatMs": self.config.heartbeat_ms,
                "computers": [],
                "pendingKey": None,
                "role": self.config.role,
            }
            return web.json_response(body, headers=NO_STORE)
        body = self.core.state(user, self.server_url(request))
        return web.json_response(body, headers=NO_STORE)

    async def _health(self, request: web.Request) -> web.Response:
        self._sweep()
        return web.json_response(self.core.health(), headers=NO_STORE)

    async def _keys(self, request: web.Request) -> web.Response:
        user = self._admit(request)
        if isinstance(user, web.Response):
            return user
        value = await self._browser_body(request)
        if isinstance(value, web.Response):
            return value
        answer, actions = self.core.create_key(user, value, self.server_url(request))
        self._apply(actions)
        return _json(answer)

    async def _key_status(self, request: web.Request) -> web.Response:
        user = self._admit(request)
        if isinstance(user, web.Response):
            return user
        self._sweep()
        return _json(self.core.key_status(user, request.query.get("key")))

    async def _rename(self, request: web.Request) -> web.Response:
        return await self._browser_change(request, self.core.rename)

    async def _delete(self, request: web.Request) -> web.Response:
        return await self._browser_change(request, self.core.delete)

    async def _browser_change(self, request: web.Request, change: Any) -> web.Response:
        user = self._admit(request)
        if isinstance(user, web.Response):
            return user
        value = await self._browser_body(request)
        if isinstance(value, web.Response):
            return value
        answer, actions = change(user, value)
        self._apply(actions)
        return _json(answer)

    def _join(self, request: web.Request, render: Any) -> web.Response:
        key = request.query.get("key", "")
        refusal = self.core.join_refusal(key)
        if refusal is not None:
            return web.Response(
                status=410,
                text=f"echo '{refusal}; create a new key' >&2; exit 1\n",
                content_type="text/plain",
                charset="utf-8",
                headers=NO_STORE,
            )
        record = self.core.registry.keys.get(_digest(key))
        replace = bool(record and record.replace)
        text = render(self.server_url(request), key, replace=replace)
        return web.Response(text=text, content_type="text/plain", charset="utf-8", headers=NO_STORE)

    async def _join_sh(self, request: web.Request) -> web.Response:
        return self._join(request, join_sh)

    async def _join_ps1(self, request: web.Request) -> web.Response:
        return self._join(request, join_ps1)

    async def _agent_pyz(self, request: web.Request) -> web.Response:
        etag = bundle_etag()
        headers = {
            **NO_STORE,
            "ETag": etag,
            "Content-Disposition": f'attachment; filename="{C.AGENT_BUNDLE_FILE}"',
        }
        return web.Response(body=agent_bundle(), content_type="application/zip", headers=headers)

    async def _agent_mjs(self, request: web.Request) -> web.Response:
        message = (
            "this hub ships a Python agent, not the Node one: "
            f"{C.url(C.Route.AGENT_PYZ)} (join.sh installs it)"
        )
        return _json(Answer(404, {"error": C.ErrorCode.NOT_FOUND, "message": message}))

    async def _settings_page(self, request: web.Request) -> web.Response:
        html = resources.files("tetherbed.hub.dsh").joinpath("ui/index.html").read_text("utf-8")
        return web.Response(text=html, content_type="text/html", charset="utf-8", headers=NO_STORE)

    async def _ui_asset(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in UI_FILES:
            raise web.HTTPNotFound()
        data = resources.files("tetherbed.hub.dsh").joinpath(f"ui/{name}").read_bytes()
        return web.Response(body=data, headers={**NO_STORE, "Content-Type": UI_FILES[name]})

    # === runtime routes (§10.5) ==============================================

    async def _runtime_answer(self, request: web.Request, run: Any) -> web.Response:
        user = self._admit(request)
        if isinstance(user, web.Response):
            return user
        assert self.runtime is not None
        value = await self._browser_body(request) if request.method == "POST" else None
        if isinstance(value, web.Response):
            return value
        try:
            status = await run(value if isinstance(value, dict) else {})
        except RuntimeRefused as exc:
            body = {"error": exc.code, "message": str(exc), **self.runtime.status()}
            return web.json_response(body, status=exc.status, headers=NO_STORE)
        status["serverUrl"] = status.get("serverUrl")
        return web.json_response(status, headers=NO_STORE)

    async def _runtime_status(self, request: web.Request) -> web.Response:
        async def run(_: dict) -> dict:
            return self.runtime.status()  # type: ignore[union-attr]

        return await self._runtime_answer(request, run)

    async def _runtime_connect(self, request: web.Request) -> web.Response:
        async def run(value: dict) -> dict:
            return await self.runtime.configure(value.get("serverUrl"), value.get("key"))  # type: ignore[union-attr]

        return await self._runtime_answer(request, run)

    async def _runtime_enable(self, request: web.Request) -> web.Response:
        async def run(value: dict) -> dict:
            enabled = value.get("enabled")
            if not isinstance(enabled, bool):
                raise RuntimeRefused(400, C.ErrorCode.BAD_REQUEST, "enabled must be a boolean")
            return await self.runtime.enable(enabled)  # type: ignore[union-attr]

        return await self._runtime_answer(request, run)

    async def _runtime_disconnect(self, request: web.Request) -> web.Response:
        async def run(_: dict) -> dict:
            return await self.runtime.disconnect()  # type: ignore[union-attr]

        return await self._runtime_answer(request, run)

    # === model tools (client API) ============================================

    def _client(self, request: web.Request) -> str | web.Response:
        user = admit_client(self.store, bearer(request.headers.get("Authorization")))
        if isinstance(user, Refusal):
            return _client_error(user.status, user.code, user.message)
        return user

    async def _tool_list(self, request: web.Request) -> web.Response:
        user = self._client(request)
        if isinstance(user, web.Response):
            return user
        names = self.core.tool_names(user)
        return web.json_response({"tools": [tools.definition(n) for n in names]}, headers=NO_STORE)

    async def _prompt(self, request: web.Request) -> web.Response:
        user = self._client(request)
        if isinstance(user, web.Response):
            return user
        self._sweep()
        text = tools.prompt_section(self.core.computer_list(user)["computers"])
        return web.json_response({"text": text}, headers=NO_STORE)

    async def _cancel(self, request: web.Request) -> web.Response:
        user = self._client(request)
        if isinstance(user, web.Response):
            return user
        actions = self.core.cancel_exec(user, request.match_info["request_id"])
        if not actions:
            return _client_error(404, C.ErrorCode.UNKNOWN_REQUEST, "no such running execution")
        self._apply(actions)
        return web.json_response({"ok": True}, headers=NO_STORE)

    async def _tool_call(self, request: web.Request) -> web.StreamResponse:
        user = self._client(request)
        if isinstance(user, web.Response):
            return user
        name = request.match_info["name"]
        if name not in tools.DEFINITIONS:
            return _client_error(404, T.UNKNOWN_TOOL, f"no tool {name!r}")
        try:
            args = await self._body(request, C.TOOL_BODY_LIMIT)
        except BodyTooLarge as exc:
            return _client_error(413, T.TOO_LARGE, str(exc))
        except (ValueError, UnicodeDecodeError) as exc:
            return _client_error(400, T.INVALID_ARGUMENTS, f"arguments are not JSON: {exc}")
        args = {} if args is None else args
        problems = tools.argument_problems(name, args)
        if problems:
            return _client_error(400, T.INVALID_ARGUMENTS, "; ".join(problems))
        self._sweep()
        if name not in self.core.tool_names(user):
            return _tool_error(
                ToolError(
                    T.UNSUPPORTED,
                    "none of your computers' agents supports file access (upgrade the agent)",
                    409,
                )
            )
        try:
            if name == "computer_list":
                value = self.core.computer_list(user)
                return self._tool_answer(value, tools.render_list(value))
            if name == "computer_exec":
                return await self._exec(request, user, args)
            if name == "job_output":
                view = self.core.job_view(user, args["jobId"], int(args.get("since") or 0))
                if isinstance(view, ToolError):
                    return _tool_error(view)
                return self._tool_answer(view, tools.render_job(view))
            if name == "job_kill":
                view, actions = self.core.kill_job(user, args["jobId"])
                self._apply(actions)
                if isinstance(view, ToolError):
                    return _tool_error(view)
                return self._tool_answer(view, tools.render_job(view))
            value, content = await tool_calls.FILE_CALLS[name](self, user, args)
            return self._tool_answer(value, content)
        except tool_calls.ToolCallError as exc:
            return _tool_error(exc.error)

    @staticmethod
    def _tool_answer(value: dict[str, Any], content: list[dict[str, str]]) -> web.Response:
        return web.json_response({"value": value, "content": content}, headers=NO_STORE)

    async def fs(
        self, user: str, computer: str | None, request: dict[str, Any]
    ) -> tuple[dict[str, Any], Computer]:
        """`tool_calls.DispatchPort`: one fs request, awaited."""
        pending, found, actions = self.core.start_fs(user, computer, request)
        if isinstance(pending, ToolError):
            raise tool_calls.ToolCallError(pending)
        assert found is not None
        queue: asyncio.Queue[Output | Settled] = asyncio.Queue()
        self._waiters[pending.request_id] = queue
        try:
            self._apply(actions)
            while True:
                item = await queue.get()
                if isinstance(item, Settled):
                    break
        finally:
            self._waiters.pop(pending.request_id, None)
        if item.error is not None:
            raise tool_calls.ToolCallError(item.error)
        return item.value or {}, found

    async def _exec(
        self, request: web.Request, user: str, args: dict[str, Any]
    ) -> web.StreamResponse:
        background = bool(args.get("run_in_background"))
        execution, actions = self.core.start_exec(
            user,
            args["computer"],
            args["command"],
            cwd=args.get("cwd"),
            timeout_ms=args.get("timeoutMs"),
            background=background,
        )
        if isinstance(execution, ToolError):
            return _tool_error(execution)
        rid = execution.request_id
        computer = self.core.registry.computers[execution.computer_id]
        who = {"id": computer.id, "name": computer.name}
        if background:
            self._apply(actions)
            assert execution.job is not None
            value = {
                "jobId": execution.job.id,
                "computer": who,
                "command": args["command"],
                "background": True,
            }
            return self._tool_answer(value, tools.render_exec(value))
        queue: asyncio.Queue[Output | Settled] = asyncio.Queue()
        self._waiters[rid] = queue
        streaming = NDJSON in request.headers.get("Accept", "")
        response: web.StreamResponse | None = None
        try:
            self._apply(actions)
            if streaming:
                response = web.StreamResponse(headers={**NO_STORE, "Content-Type": NDJSON})
                await response.prepare(request)
                await _line(response, {"type": "started", "requestId": rid, "computer": who})
            settled = await self._await_settled(request, user, rid, queue, response)
        except (ConnectionError, RuntimeError):
            # The caller went away while output was being written (§5.2: an
            # aborted call cancels the command).
            self._apply(self.core.cancel_exec(user, rid, "aborted: the caller went away"))
            return response if response is not None else web.Response(status=499)
        except asyncio.CancelledError:
            self._apply(self.core.cancel_exec(user, rid, "aborted: the hub is stopping"))
            raise
        finally:
            self._waiters.pop(rid, None)
        error, value = self._exec_outcome(settled)
        if response is None:
            if error is not None:
                return _tool_error(error)
            return self._tool_answer(value, tools.render_exec(value))
        if error is not None:
            body: dict[str, Any] = {"code": error.code, "message": error.message}
            if error.details is not None:
                body["details"] = error.details
            last = {"type": "error", "status": error.status, "error": body}
        else:
            last = {"type": "result", "value": value, "content": tools.render_exec(value)}
        with contextlib.suppress(ConnectionError, RuntimeError):  # the caller left
            await _line(response, last)
            await response.write_eof()
        return response

    async def _await_settled(
        self,
        request: web.Request,
        user: str,
        rid: str,
        queue: asyncio.Queue[Output | Settled],
        response: web.StreamResponse | None,
    ) -> Settled:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), CALLER_CHECK_S)
            except TimeoutError:
                transport = request.transport
                if transport is None or transport.is_closing():
                    self._apply(self.core.cancel_exec(user, rid, "aborted: the caller went away"))
                continue
            if isinstance(item, Settled):
                return item
            if response is not None:
                data = base64.b64encode(item.data).decode("ascii")
                await _line(response, {"type": "output", "stream": item.stream, "data": data})

    @staticmethod
    def _exec_outcome(settled: Settled) -> tuple[ToolError | None, dict[str, Any]]:
        if settled.error is not None:
            return settled.error, {}
        value = settled.value or {}
        if value.get("timedOut"):
            tail = (value.get("stdout") or "")[-2000:]
            message = (
                f"the command timed out on '{value['computer']['name']}' after "
                f"{round(value.get('durationMs', 0))} ms and was killed"
            )
            if tail:
                message += f"; last output:\n{tail}"
            return ToolError(T.TIMEOUT, message, 504, {"value": value}), value
        return None, value


async def _line(response: web.StreamResponse, value: dict[str, Any]) -> None:
    await response.write(json.dumps(value, separators=(",", ":")).encode() + b"\n")


def _digest(key: str) -> str:
    return digest(key) if is_credential(key) else ""


def mount_dsh_computers(app: web.Application, store: HubStore, config: DshConfig) -> DshServer:
    """The one call the hub makes: serve dsh-computers on its application."""
    state_dir = Path(config.state_dir) if config.state_dir else None
    server = DshServer(store, config, state_dir=state_dir)
    server.mount(app)
    return server
