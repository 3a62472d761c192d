"""Where a webhook may go: a tenant's URL must not reach the operator's network (inv. 9).

Checked twice: the URL when it is registered, and the address actually connected to when
a delivery is sent, after resolving the name then (a name that resolves to a private
address at send time, DNS rebinding, is refused). Only global addresses pass; loopback
only if the operator allows it, never link-local, private, or cloud metadata addresses.
"""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from agentq.core.hosts import UNRESOLVABLE, dns_name
from agentq.errors import InvalidInput
from agentq.webhooks.policy import ALLOW_HTTP, ALLOW_LOOPBACK, WebhookPolicy

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(Exception):
    """The name resolves to an address a webhook may not reach (or does not resolve)."""


@dataclass(frozen=True)
class Target:
    """A checked URL, split: what to resolve, and what to ask for."""

    scheme: str
    host: str
    port: int
    path: str  # with the query

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def check_url(url: str, policy: WebhookPolicy) -> Target:
    """The URL as a Target, or InvalidInput (code url_refused) saying why a webhook may not
    use it.

    What only the operator's settings allow (plain http, a loopback address) is refused all
    at once, naming each setting, so a developer learns in one answer what to set.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _refused("url is not a valid URL") from None
    if parts.scheme not in ("https", "http"):
        raise _refused(f"url must use https{' or http' if policy.allow_http else ''}")
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise _refused("url needs a host and no user or password")
    if parts.fragment:
        raise _refused("url must not have a fragment")
    host = parts.hostname.rstrip(".").lower()
    if dns_name(host) is None:
        raise _refused(f"url {UNRESOLVABLE}")
    literal = _literal(host)
    loopback = _is_loopback(literal) if literal is not None else (
        host == "localhost" or host.endswith(".localhost"))
    if literal is not None and not loopback and not allowed(literal, policy):
        raise _refused("url points at an address that is not public (private, link-local "
                       "or reserved), which no setting lets webhooks reach")
    _refuse_unless_allowed(http=parts.scheme == "http" and not policy.allow_http,
                           loopback=loopback and not policy.allow_loopback)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), path)


def _refuse_unless_allowed(*, http: bool, loopback: bool) -> None:
    """InvalidInput naming the operator's settings that would allow plain http, loopback, or both."""
    needed = {ALLOW_HTTP: "uses http, not https", ALLOW_LOOPBACK: "points at a loopback address"}
    refused = [name for name, refuses in ((ALLOW_HTTP, http), (ALLOW_LOOPBACK, loopback)) if refuses]
    if refused:
        raise InvalidInput(
            f"url {' and '.join(needed[name] for name in refused)}, which webhooks reach only "
            f"where the operator sets {' and '.join(f'{name}=on' for name in refused)}",
            details={"settings": refused}, code="url_refused")


def _refused(message: str) -> InvalidInput:
    """A refusal of the URL itself, with the code the API answers it with."""
    return InvalidInput(message, code="url_refused")


# IPv6 prefixes that carry an IPv4 address a gateway may forward to: NAT64 (RFC 6052, the
# well-known and the local-use prefix). 6to4 and IPv4-mapped addresses say so themselves.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def allowed(address: IPAddress, policy: WebhookPolicy) -> bool:
    """A global address, or loopback when the operator allows it; nothing else.

    Careful: an IPv6 address that embeds an IPv4 one (mapped, IPv4-compatible, 6to4, NAT64)
    is judged by the IPv4 address inside, which Python's `is_global` of the IPv6 address
    does not look at on every version: 2002:a9fe:a9fe:: reaches 169.254.169.254.
    """
    if _is_loopback(address):
        return policy.allow_loopback
    address = _embedded_ipv4(address) or address
    return address.is_global and not address.is_multicast


def _is_loopback(address: IPAddress) -> bool:
    return (_embedded_ipv4(address) or address).is_loopback


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    packed = address.packed
    if any(address in net for net in _NAT64) or (packed[:12] == bytes(12) and int(address) > 1):
        return ipaddress.IPv4Address(packed[12:])  # NAT64, or IPv4-compatible (::a.b.c.d)
    return None


def resolve(target: Target, policy: WebhookPolicy) -> IPAddress:
    """The address to connect to; AddressRefused if any address of the name is not allowed.

    Careful: every address the name has now is checked, not only the first, so a name
    that mixes a public and a private address cannot be steered to the private one.
    """
    literal = _literal(target.host)
    found = [literal] if literal is not None else _addresses(target)
    if not found:
        raise AddressRefused("the host name does not resolve")
    refused = [a for a in found if not allowed(a, policy)]
    if refused and all(_is_loopback(a) for a in refused):
        raise AddressRefused(f"the host resolves to a loopback address, which webhooks reach "
                             f"only with {ALLOW_LOOPBACK}=on")
    if refused:
        raise AddressRefused("the host resolves to an address webhooks may not reach")
    return found[0]


def _addresses(target: Target) -> list[IPAddress]:
    """Every address the name has now. The resolver is handed ASCII only: a name it could
    not encode (one stored before names were checked) is not asked for, since gevent's
    resolver thread prints that failure as a traceback."""
    name = dns_name(target.host)
    if name is None:
        raise AddressRefused("the host name does not resolve")
    try:
        infos = socket.getaddrinfo(name, target.port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise AddressRefused("the host name does not resolve") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
