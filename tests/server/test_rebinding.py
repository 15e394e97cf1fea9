"""DNS rebinding: on any loopback address the server answers only requests that
name a loopback host, so a web page whose name was rebound to 127.x cannot reach it."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from starlette.requests import Request

from server import transports

from .conftest import INITIALIZE, bearer, serving

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_every_loopback_address_refuses_a_foreign_host_or_origin(
    tmp_path: Path, transport: str
) -> None:
    host = "127.0.0.2"
    async with (
        serving(tmp_path, "--transport", transport, host=host) as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        base = f"http://{host}:{served.port}"
        method, url = ("POST", f"{base}/mcp") if transport == "http" else ("GET", f"{base}/sse")
        body = INITIALIZE if transport == "http" else None

        async def status(**extra: str) -> int:
            async with http.stream(method, url, json=body, headers=bearer(None, **extra)) as r:
                return r.status_code

        assert await status(Host="evil.example") == 421
        assert await status(Host=f"evil.example:{served.port}") == 421
        assert await status(Origin="http://evil.example") == 403
        assert await status() == 200
        assert await status(Host=f"localhost:{served.port}") == 200
        assert await status(Origin=f"http://{host}:{served.port}") == 200


@pytest.mark.parametrize(
    ("bound", "host", "allowed"),
    [
        ("127.0.0.1", "127.0.0.1", True),  # port 80: no port in the Host header
        ("127.0.0.1", "127.0.0.1:80", True),
        ("127.0.0.2", "127.0.0.2", True),
        ("127.0.0.2", "localhost", True),
        ("::1", "[::1]", True),
        ("::1", "[::1]:8765", True),
        ("127.0.0.2", "127.0.0.3:8765", False),
        ("127.0.0.2", "127.0.0.2.evil.example", False),
        ("localhost", "localhost.evil.example:80", False),
    ],
)
async def test_the_allowed_hosts_name_the_bound_address_with_and_without_a_port(
    bound: str, host: str, allowed: bool
) -> None:
    from mcp.server.transport_security import TransportSecurityMiddleware

    settings = transports.rebinding_protection(bound)
    assert settings is not None
    scope = {"type": "http", "method": "GET", "headers": [(b"host", host.encode())]}
    refused = await TransportSecurityMiddleware(settings).validate_request(Request(scope))
    assert (refused is None) is allowed


def test_a_non_loopback_address_relies_on_tokens() -> None:
    assert transports.rebinding_protection("0.0.0.0") is None
    assert transports.rebinding_protection("192.168.1.10") is None
