"""Where a webhook may go: the URL when it is registered, the resolved address when it is sent."""
from __future__ import annotations

import ipaddress
import socket

import pytest

from agentq.errors import InvalidInput
from agentq.webhooks.addresses import AddressRefused, Target, allowed, check_url, resolve
from agentq.webhooks.policy import WebhookPolicy

STRICT = WebhookPolicy()
LOOPBACK_OK = WebhookPolicy(allow_http=True, allow_loopback=True)


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "0.0.0.0", "224.0.0.1", "::1", "fe80::1", "fc00::1", "fd00:ec2::254", "::ffff:10.0.0.1",
    # IPv4 inside IPv6: 6to4, NAT64 and IPv4-compatible forms of the metadata and loopback
    "2002:a9fe:a9fe::1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:1", "::127.0.0.1", "::10.0.0.1",
])
def test_no_private_loopback_link_local_or_metadata_address_is_allowed(address):
    assert not allowed(ipaddress.ip_address(address), STRICT)


def test_loopback_is_allowed_only_when_the_operator_says_so_and_nothing_else_with_it():
    assert allowed(ipaddress.ip_address("127.0.0.1"), LOOPBACK_OK)
    assert not allowed(ipaddress.ip_address("10.0.0.1"), LOOPBACK_OK)
    assert allowed(ipaddress.ip_address("93.184.216.34"), STRICT)
    assert allowed(ipaddress.ip_address("2002:5db8:d822::1"), STRICT)  # 6to4 of a public one
    assert allowed(ipaddress.ip_address("2606:2800:220:1::1"), STRICT)


def test_a_name_with_any_private_address_among_its_addresses_is_refused(monkeypatch):
    def two(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(socket, "getaddrinfo", two)
    with pytest.raises(AddressRefused):
        resolve(check_url("https://mixed.example.com/h", STRICT), STRICT)


def test_a_name_that_resolves_to_loopback_at_send_time_names_the_setting_that_allows_it(monkeypatch):
    def loopback(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", loopback)
    with pytest.raises(AddressRefused, match="AGENTQ_WEBHOOK_ALLOW_LOOPBACK=on"):
        resolve(check_url("https://rebound.example.com/h", STRICT), STRICT)


def test_a_name_that_does_not_resolve_is_refused_not_an_error(monkeypatch):
    def none(*args, **kwargs):
        raise socket.gaierror("no such name")

    monkeypatch.setattr(socket, "getaddrinfo", none)
    with pytest.raises(AddressRefused):
        resolve(check_url("https://gone.example.com/h", STRICT), STRICT)


def test_a_name_the_resolver_cannot_encode_is_refused_without_asking_it(monkeypatch):
    asked = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: asked.append(args) or [])
    stored = Target("https", f"{'a' * 64}.example.com", 443, "/h")  # registered before the check
    with pytest.raises(AddressRefused):
        resolve(stored, STRICT)
    assert asked == []


def test_the_resolver_is_handed_a_name_in_ascii(monkeypatch):
    asked = []

    def public(host, port, *args, **kwargs):
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]

    monkeypatch.setattr(socket, "getaddrinfo", public)
    resolve(check_url("https://bücher.example/h", STRICT), STRICT)
    assert asked == ["xn--bcher-kva.example"]


@pytest.mark.parametrize("url", ["ftp://a.example.com/", "https:///nohost", "https://a.example.com/#frag",
                                 "http://a.example.com/", "https://x.localhost/h",
                                 f"https://{'a' * 64}.example.com/h", "https://a..example.com/h"])
def test_urls_without_an_allowed_scheme_or_host_are_refused(url):
    with pytest.raises(InvalidInput):
        check_url(url, STRICT)


def test_the_host_header_keeps_the_name_and_a_non_default_port():
    assert check_url("https://a.example.com/h?x=1", STRICT).host_header == "a.example.com"
    target = check_url("https://a.example.com:8443/h?x=1", STRICT)
    assert target.host_header == "a.example.com:8443" and target.path == "/h?x=1"
