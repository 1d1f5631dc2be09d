"""The gateway proxy's allowlist (agentenv/guest/egress.py), without containers: entries
as Harbor writes them, and names whose DNS answer points where no name may lead."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from agentenv.guest import egress
from agentenv.sandbox.spec import SandboxSpec

pytestmark = pytest.mark.no_docker


@pytest.mark.parametrize(
    ("entry", "canonical"),
    [
        ("Example.COM.", "example.com"),
        ("*.example.com", "*.example.com"),
        ("192.0.2.7", "192.0.2.7"),
        ("2001:DB8::0:1", "2001:db8::1"),
        ("10.0.0.0/8", "10.0.0.0/8"),
    ],
)
def test_entries_normalise(entry: str, canonical: str) -> None:
    assert egress.normalize(entry) == canonical


@pytest.mark.parametrize(
    "entry",
    ["https://example.com", "example.com:443", "example.com/path", "a.*.com", "*.", "10.0.0.1/8"],
)
def test_urls_ports_paths_and_odd_wildcards_are_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        egress.normalize(entry)


def _dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, str]) -> None:
    def fake(host: str, port: int, *args: Any) -> list[Any]:
        if host not in answers:
            raise socket.gaierror(-2, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]

    monkeypatch.setattr(egress.socket, "getaddrinfo", fake)


def test_names_wildcards_and_cidrs(monkeypatch: pytest.MonkeyPatch) -> None:
    _dns(monkeypatch, {"api.example.com": "203.0.113.5", "other.org": "198.51.100.9"})
    allow = egress.Allowlist(["*.example.com", "198.51.100.0/24"])
    assert allow.resolve("api.example.com", 443) == ("203.0.113.5", "")
    assert allow.resolve("other.org", 443) == ("198.51.100.9", "")  # the resolved address
    assert allow.resolve("example.com", 443)[0] is None  # the wildcard is for names under it
    assert allow.resolve("203.0.113.5", 443)[0] is None  # an address must be listed as one


def test_an_allowed_name_cannot_lead_to_the_gateway_or_the_metadata_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The attack: a wildcard-allowed name whose DNS answer is loopback (the gateway's own
    ports), link-local (cloud metadata), the sandbox's side of the gateway or the host."""
    _dns(
        monkeypatch,
        {
            "a.evil.test": "127.0.0.1",
            "b.evil.test": "169.254.169.254",
            "c.evil.test": "10.9.0.3",
            "d.evil.test": "172.17.0.1",  # the host, on the gateway's outside network
        },
    )
    allow = egress.Allowlist(["*.evil.test"], inside=["10.9.0.0/24", "172.17.0.1"])
    for name in ("a.evil.test", "b.evil.test", "c.evil.test", "d.evil.test"):
        address, why = allow.resolve(name, 80)
        assert address is None and "not on the task's network allowlist" in why
    listed = egress.Allowlist(["*.evil.test", "169.254.169.254"])
    assert listed.resolve("b.evil.test", 80)[0] == "169.254.169.254"  # listed by address


def test_spec_checks_entries_and_wants_the_allowlist_network() -> None:
    spec = SandboxSpec(network="allowlist", allowed_hosts=["Example.com", "example.com"])
    assert spec.allowed_hosts == ("example.com",)
    with pytest.raises(ValueError, match="needs network 'allowlist'"):
        SandboxSpec(network="bridge", allowed_hosts=["example.com"])
    with pytest.raises(ValueError, match="is not a hostname"):
        SandboxSpec(network="allowlist", allowed_hosts=["http://example.com"])


def test_podman_refuses_an_allowlist_by_name() -> None:
    from agentenv.sandbox.errors import SandboxError
    from agentenv.sandbox.podman.driver import _create_args

    spec = SandboxSpec(backend="podman", network="allowlist", allowed_hosts=["example.com"])
    with pytest.raises(SandboxError, match="allowlist needs the docker backend"):
        _create_args(spec, "img")
