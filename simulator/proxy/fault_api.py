"""Tetherbed's HTTP endpoints for faults Toxiproxy does not have.

They live beside Toxiproxy's routes, under the same `/proxies/{proxy}` prefix,
and use the same JSON error body. Times are milliseconds; `stream` is
`upstream` (client → server), `downstream` or `both`.

    GET    /proxies/{proxy}/partition          {"upstream": {mode, timeout} | null,
                                                "downstream": {mode, timeout} | null}
    POST   /proxies/{proxy}/partition          {stream?: both, mode?: hold|drop|timeout,
                                                timeout?: 0} → 200 the partition state
    DELETE /proxies/{proxy}/partition?stream=  heal (default both) → 204
    GET    /proxies/{proxy}/connections        [{client, websocket, toxics: {upstream, downstream}}]
    POST   /proxies/{proxy}/connections/reset  RST every current connection → {"reset": n}
    GET    /proxies/{proxy}/ws/rules           [rule, ...]
    POST   /proxies/{proxy}/ws/rules           {action, stream?, type?, count?, delay?, copies?,
                                                max_hold?, code?, reason?, toward?, probability?,
                                                name?} → 200 rule
    GET    /proxies/{proxy}/ws/rules/{rule}
    DELETE /proxies/{proxy}/ws/rules/{rule}    → 204
    POST   /proxies/{proxy}/ws/close           {toward?: client|server|both, code, reason?}
                                               → {"connections": n}
"""

from __future__ import annotations

from aiohttp import web

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.proxy.toxiproxy_api import no_content, read_json, registry_of


def _proxy(request: web.Request) -> FaultProxy:
    return registry_of(request).get(request.match_info["proxy"])


async def _object(request: web.Request) -> dict:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise errors.bad_body("expected a JSON object")
    return body


async def partition_show(request: web.Request) -> web.Response:
    return web.json_response(_proxy(request).partitions.to_json())


async def partition_create(request: web.Request) -> web.Response:
    proxy = _proxy(request)
    body = await _object(request)
    proxy.partition(body.get("stream", "both"), body.get("mode", "hold"), body.get("timeout", 0))
    return web.json_response(proxy.partitions.to_json())


async def partition_heal(request: web.Request) -> web.Response:
    _proxy(request).heal(request.query.get("stream", "both"))
    return no_content()


async def connection_index(request: web.Request) -> web.Response:
    return web.json_response(_proxy(request).connections())


async def connection_reset(request: web.Request) -> web.Response:
    return web.json_response({"reset": _proxy(request).reset_connections()})


async def rule_index(request: web.Request) -> web.Response:
    return web.json_response([rule.to_json() for rule in _proxy(request).rules])


async def rule_create(request: web.Request) -> web.Response:
    rule = _proxy(request).add_rule(await _object(request))
    return web.json_response(rule.to_json())


async def rule_show(request: web.Request) -> web.Response:
    return web.json_response(_proxy(request).rules.get(request.match_info["rule"]).to_json())


async def rule_delete(request: web.Request) -> web.Response:
    _proxy(request).remove_rule(request.match_info["rule"])
    return no_content()


async def ws_close(request: web.Request) -> web.Response:
    proxy = _proxy(request)
    body = await _object(request)
    if "code" not in body:
        raise errors.missing_field("code")
    code, reason = body["code"], body.get("reason", "")
    if isinstance(code, bool) or not isinstance(code, int) or not isinstance(reason, str):
        raise errors.bad_body("code must be an integer and reason a string")
    count = proxy.inject_close(body.get("toward", "client"), code, reason)
    return web.json_response({"connections": count})


def add_routes(app: web.Application) -> None:
    router = app.router
    router.add_get("/proxies/{proxy}/partition", partition_show)
    router.add_post("/proxies/{proxy}/partition", partition_create)
    router.add_delete("/proxies/{proxy}/partition", partition_heal)
    router.add_get("/proxies/{proxy}/connections", connection_index)
    router.add_post("/proxies/{proxy}/connections/reset", connection_reset)
    router.add_get("/proxies/{proxy}/ws/rules", rule_index)
    router.add_post("/proxies/{proxy}/ws/rules", rule_create)
    router.add_get("/proxies/{proxy}/ws/rules/{rule}", rule_show)
    router.add_delete("/proxies/{proxy}/ws/rules/{rule}", rule_delete)
    router.add_post("/proxies/{proxy}/ws/close", ws_close)
