"""Host names in a tenant's URLs: those DNS can hold, in the ASCII a resolver is handed."""
from __future__ import annotations

import pytest

from agentq.core.hosts import dns_name

LABEL_63 = "a" * 63


@pytest.mark.parametrize("host, name", [
    ("images.example.com", "images.example.com"),
    (f"{LABEL_63}.example.com", f"{LABEL_63}.example.com"),
    ("bücher.example", "xn--bcher-kva.example"),
    ("93.184.216.34", "93.184.216.34"),
    ("2606:2800:220:1::1", "2606:2800:220:1::1"),
])
def test_a_name_dns_can_hold_is_given_in_ascii(host, name):
    assert dns_name(host) == name


@pytest.mark.parametrize("host", [
    f"{LABEL_63}a.example.com", "a..example.com", ".example.com", "\u200b.example.com",
    "ü" * 60 + ".example.com", ".".join(["a" * 60] * 5), "a\x8ab.example.com",
], ids=["label-64", "empty-label", "leading-dot", "maps-to-nothing", "long-once-encoded", "name-over-253",
        "control-character"])
def test_a_name_dns_cannot_hold_is_none(host):
    assert dns_name(host) is None
