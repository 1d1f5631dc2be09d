"""The model tests run over both transports of the local server: real HTTP on loopback, and
in this process without a socket (``K3Server.http_client``), which must behave alike."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["http", "in-process"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)
