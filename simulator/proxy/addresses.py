"""`HOST:PORT` strings as Toxiproxy writes them (`[::1]:80` for IPv6)."""

from __future__ import annotations

from tetherbed.simulator.proxy import errors


def parse_address(text: object, field: str = "address") -> tuple[str, int]:
    """(host, port); an empty host means 127.0.0.1, like a bare `:8474`."""
    if not isinstance(text, str):
        raise errors.bad_body(f"{field} must be a HOST:PORT string")
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise errors.bad_body(f"{field} must be HOST:PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "127.0.0.1", int(port)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
