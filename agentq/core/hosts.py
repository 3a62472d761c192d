"""Host names in a tenant's URLs (an image's, a webhook's): whether DNS can hold them at all.

A name DNS cannot hold (a label empty or longer than 63 characters once IDNA-encoded, the
name longer than 253, characters IDNA refuses) is the tenant's bad input, refused as such;
handed to a resolver it raises UnicodeError, which gevent's resolver thread prints as a
traceback before the caller sees it.
"""
from __future__ import annotations

MAX_NAME_CHARS = 253  # RFC 1035, without the root's dot
UNRESOLVABLE = "names a host DNS cannot hold (labels of 1 to 63 characters, 253 in all)"


def dns_name(host: str) -> str | None:
    """`host` in the ASCII a resolver is handed (IDNA, as `socket.getaddrinfo` encodes it),
    or None if DNS cannot hold it. An IP address passes as itself."""
    try:
        name = host.encode("idna").decode("ascii")
    except UnicodeError:  # the codec's own refusal: a label empty or over 63, a bad character
        return None
    if len(name.rstrip(".")) > MAX_NAME_CHARS:
        return None
    return name
