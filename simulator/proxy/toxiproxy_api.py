"""Toxiproxy's HTTP API (v2) over a `ProxyRegistry`, so Toxiproxy clients can drive it.

    GET    /version
    POST   /reset                          enable all proxies, remove all toxics → 204
    GET    /proxies                        {name: proxy, ...}
    POST   /proxies                        {name, listen, upstream, enabled?} → 201 proxy
    POST   /populate                       [proxy, ...] → 201 {"proxies": [...]}
    GET    /proxies/{proxy}                proxy with its toxics
    POST   /proxies/{proxy}                update {listen?, upstream?, enabled?} (PATCH too)
    DELETE /proxies/{proxy}                → 204
    GET    /proxies/{proxy}/toxics         [toxic, ...]
    POST   /proxies/{proxy}/toxics         {name?, type, stream?, toxicity?, attributes} → 200
    GET    /proxies/{proxy}/toxics/{toxic}
    POST   /proxies/{proxy}/toxics/{toxic} update {toxicity?, attributes?} (PATCH too)
    DELETE /proxies/{proxy}/toxics/{toxic} → 204

A proxy is `{name, listen, upstream, enabled, toxics}`; a toxic is `{name, type,
stream, toxicity, attributes}`. Errors are `{"error": message, "status": code}`
with Toxiproxy's codes: 400 bad body / missing field / invalid stream or type,
404 unknown proxy or toxic, 409 name taken, 500 cannot listen.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tetherbed import __version__
from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.registry import ProxyRegistry

REGISTRY = web.AppKey("registry", ProxyRegistry)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except errors.ProxyError as exc:
        return web.json_response({"error": exc.message, "status": exc.status}, status=exc.status)


async def read_json(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_body(str(exc)) from None


def registry_of(request: web.Request) -> ProxyRegistry:
    return request.app[REGISTRY]


def no_content() -> web.Response:
    return web.Response(status=204)


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": f"tetherbed-{__version__}"})


async def reset(request: web.Request) -> web.Response:
    await registry_of(request).reset()
    return no_content()


async def proxy_index(request: web.Request) -> web.Response:
    return web.json_response({proxy.name: proxy.to_json() for proxy in registry_of(request)})


async def proxy_create(request: web.Request) -> web.Response:
    proxy = await registry_of(request).create_json(await read_json(request))
    return web.json_response(proxy.to_json(), status=201)


async def populate(request: web.Request) -> web.Response:
    body = await read_json(request)
    if not isinstance(body, list):
        raise errors.bad_body("populate takes a JSON array of proxies")
    proxies = await registry_of(request).populate(body)
    return web.json_response({"proxies": [proxy.to_json() for proxy in proxies]}, status=201)


async def proxy_show(request: web.Request) -> web.Response:
    return web.json_response(registry_of(request).get(request.match_info["proxy"]).to_json())


async def proxy_update(request: web.Request) -> web.Response:
    proxy = registry_of(request).get(request.match_info["proxy"])
    body = await read_json(request)
    if not isinstance(body, dict):
        raise errors.bad_body("a proxy is a JSON object")
    enabled = body.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise errors.bad_body("enabled must be true or false")
    await proxy.update(listen=body.get("listen"), upstream=body.get("upstream"), enabled=enabled)
    return web.json_response(proxy.to_json())


async def proxy_delete(request: web.Request) -> web.Response:
    await registry_of(request).remove(request.match_info["proxy"])
    return no_content()


async def toxic_index(request: web.Request) -> web.Response:
    proxy = registry_of(request).get(request.match_info["proxy"])
    return web.json_response([toxic.to_json() for toxic in proxy.toxics])


async def toxic_create(request: web.Request) -> web.Response:
    proxy = registry_of(request).get(request.match_info["proxy"])
    toxic = proxy.add_toxic(await read_json(request))
    return web.json_response(toxic.to_json())


async def toxic_show(request: web.Request) -> web.Response:
    proxy = registry_of(request).get(request.match_info["proxy"])
    return web.json_response(proxy.toxic(request.match_info["toxic"]).to_json())


async def toxic_update(request: web.Request) -> web.Response:
    proxy = registry_of(request).get(request.match_info["proxy"])
    body = await read_json(request)
    if not isinstance(body, dict):
        raise errors.bad_body("a toxic is a JSON object")
    return web.json_response(proxy.update_toxic(request.match_info["toxic"], body).to_json())


async def toxic_delete(request: web.Request) -> web.Response:
    proxy = registry_of(request).get(request.match_info["proxy"])
    proxy.remove_toxic(request.match_info["toxic"])
    return no_content()


def add_routes(app: web.Application) -> None:
    router = app.router
    router.add_get("/version", version)
    router.add_post("/reset", reset)
    router.add_get("/proxies", proxy_index)
    router.add_post("/proxies", proxy_create)
    router.add_post("/populate", populate)
    router.add_get("/proxies/{proxy}", proxy_show)
    router.add_post("/proxies/{proxy}", proxy_update)
    router.add_patch("/proxies/{proxy}", proxy_update)
    router.add_delete("/proxies/{proxy}", proxy_delete)
    router.add_get("/proxies/{proxy}/toxics", toxic_index)
    router.add_post("/proxies/{proxy}/toxics", toxic_create)
    router.add_get("/proxies/{proxy}/toxics/{toxic}", toxic_show)
    router.add_post("/proxies/{proxy}/toxics/{toxic}", toxic_update)
    router.add_patch("/proxies/{proxy}/toxics/{toxic}", toxic_update)
    router.add_delete("/proxies/{proxy}/toxics/{toxic}", toxic_delete)
