"""Errors of the proxy's object API, each carrying the HTTP status Toxiproxy uses.

The HTTP layer turns them into Toxiproxy's error body `{"error": ..., "status": ...}`
so existing clients see the codes they expect (404 unknown, 409 exists, 400 bad).
"""

from __future__ import annotations


class ProxyError(Exception):
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ProxyError):
    status = 400


class NotFound(ProxyError):
    status = 404


class AlreadyExists(ProxyError):
    status = 409


def bad_body(detail: str) -> BadRequest:
    return BadRequest(f"bad request body: {detail}")


def missing_field(field: str) -> BadRequest:
    return BadRequest(f"missing required field: {field}")


def invalid_stream() -> BadRequest:
    return BadRequest("stream was invalid, can be either upstream or downstream")


def invalid_toxic_type(kind: object) -> BadRequest:
    return BadRequest(f"invalid toxic type: {kind}")


def proxy_not_found(name: str) -> NotFound:
    return NotFound(f"proxy not found: {name}")


def proxy_exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"proxy already exists: {name}")


def toxic_not_found(name: str) -> NotFound:
    return NotFound(f"toxic not found: {name}")


def toxic_exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"toxic already exists: {name}")


def rule_not_found(name: str) -> NotFound:
    return NotFound(f"message rule not found: {name}")


def rule_exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"message rule already exists: {name}")
