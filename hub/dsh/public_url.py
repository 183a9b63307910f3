"""Where the hub says it can be reached: the `serverUrl` of /state, /keys and join.sh.

Tetherbed's reading (docs/spec-notes.md) departs from §4.2 on purpose: the
address never comes from a header a client controls. A forwarded `Host`
would otherwise put an attacker's URL into the one-line install command a
user pastes into a terminal. So: the operator's `public_url` if set, else
the local address of the socket the request arrived on (the hub's own
address as this client reached it, e.g. `http://172.18.0.2:8765` in a
container network) — never `Host`, `Origin` or `X-Forwarded-*`.

`from_headers` is §4.2 steps 2-3 as the spec writes them; the hub uses it
only under the planted defect "install_url_from_forwarded_header", so that
a conformance case can show what it costs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

_AUTHORITY = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    r"[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?\Z"
)


def socket_base(sockname: object, tls: bool) -> str:
    """`http(s)://ADDRESS:PORT` from a socket's local address."""
    scheme = "https" if tls else "http"
    if not isinstance(sockname, tuple) or len(sockname) < 2:
        return ""
    host, port = str(sockname[0]), int(sockname[1])
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return f"{scheme}://{host}:{port}"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"{scheme}://{address.ipv4_mapped}:{port}"
        return f"{scheme}://[{address}]:{port}"
    return f"{scheme}://{address}:{port}"


def clean_authority(value: str) -> bool:
    return 0 < len(value) <= 255 and _AUTHORITY.match(value) is not None


def _first(value: str | None) -> str:
    return (value or "").split(",", 1)[0].strip()


def from_headers(headers: Mapping[str, str], own_scheme: str) -> str | None:
    """§4.2 steps 2-3: forwarded headers, then `Host` with a protocol hint."""
    proto = _first(headers.get("x-forwarded-proto")).lower()
    host = _first(headers.get("x-forwarded-host"))
    if proto in ("http", "https") and host and clean_authority(host):
        return f"{proto}://{host}"
    forwarded = _first(headers.get("forwarded"))
    if forwarded:
        fields = {}
        for part in forwarded.split(";"):
            name, _, value = part.strip().partition("=")
            fields[name.lower()] = value.strip().strip('"')
        if fields.get("proto") in ("http", "https") and clean_authority(fields.get("host", "")):
            return f"{fields['proto']}://{fields['host']}"
    host = headers.get("host", "").strip()
    if not clean_authority(host):
        return None
    if proto in ("http", "https"):
        return f"{proto}://{host}"
    if _first(headers.get("x-forwarded-ssl")).lower() == "on":
        return f"https://{host}"
    origin = headers.get("origin", "")
    scheme, sep, authority = origin.partition("://")
    if sep and authority == host and scheme in ("http", "https"):
        return f"{scheme}://{host}"
    return f"{own_scheme}://{host}"
