"""Routing between endpoints: rules keep sensitive tasks off hosted APIs, fallbacks happen
when an endpoint is down and never cross a rule; every decision is recorded."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from agentenv.errors import AllEndpointsDown, NoRoute
from agentenv.model import OpenAIChatModel
from agentenv.model.endpoints import K3_CAPABILITIES, Endpoint
from agentenv.model.router import Router, Rule
from agentenv.testing import K3Server, ScriptedTurn

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

HELLO = [{"role": "user", "content": "hello"}]
ANSWER = [ScriptedTurn(reasoning="r", content="hi")]


def endpoint(name: str, base_url: str, *, hosted: bool) -> Endpoint:
    return Endpoint(
        name=name, base_url=base_url, model="kimi-k3", hosted=hosted, capabilities=K3_CAPABILITIES
    )


def quick_client(e: Endpoint) -> OpenAIChatModel:
    return OpenAIChatModel(
        base_url=e.base_url, api_key="k", max_attempts=2, backoff_initial_s=0.01, timeout_s=5
    )


@pytest.fixture
def dead_url() -> str:
    """A loopback port nobody listens on: connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def hosted() -> Iterator[K3Server]:
    with K3Server(ANSWER, hosted=True) as server:
        yield server


@pytest.fixture
def local() -> Iterator[K3Server]:
    with K3Server(ANSWER) as server:
        yield server


def test_rules_choose_the_allowed_endpoints(hosted: K3Server, local: K3Server) -> None:
    router = Router(
        [
            endpoint("cloud", hosted.base_url, hosted=True),
            endpoint("gpu", local.base_url, hosted=False),
        ]
    )
    assert [e.name for e, _ in router.allowed([])] == ["cloud", "gpu"]
    assert [e.name for e, _ in router.allowed(["sensitive"])] == ["gpu"]
    only_cloud = Router([endpoint("cloud", hosted.base_url, hosted=True)])
    with pytest.raises(NoRoute, match="no endpoint may serve task 't1'"):
        only_cloud.for_task(["sensitive"], task_id="t1")
    named = Router(
        [endpoint("a", local.base_url, hosted=False), endpoint("b", local.base_url, hosted=False)],
        rules=[Rule(tag="pinned", endpoints=["b"])],
    )
    assert [e.name for e, _ in named.allowed(["pinned"])] == ["b"]
    with pytest.raises(ValueError, match="unique"):
        Router([endpoint("a", local.base_url, hosted=False)] * 2)


async def test_sensitive_task_never_reaches_the_hosted_endpoint(
    hosted: K3Server, local: K3Server
) -> None:
    router = Router(
        [
            endpoint("cloud", hosted.base_url, hosted=True),
            endpoint("gpu", local.base_url, hosted=False),
        ],
        make_model=quick_client,
    )
    try:
        done = await router.for_task(["sensitive"], task_id="secret").complete(HELLO)
        assert done.route is not None and done.route.endpoint == "gpu"
        assert "sensitive" in done.route.reason
        other = await router.for_task([], task_id="open").complete(HELLO)
        assert other.route is not None and other.route.endpoint == "cloud"
    finally:
        await router.aclose()
    assert len(hosted.requests) == 1 and len(local.requests) == 1


async def test_fallback_when_an_endpoint_is_down_and_only_within_the_rules(
    dead_url: str, hosted: K3Server, local: K3Server
) -> None:
    # A normal task falls back from the dead self-hosted endpoint to the next one.
    router = Router(
        [endpoint("gpu", dead_url, hosted=False), endpoint("local", local.base_url, hosted=False)],
        make_model=quick_client,
    )
    try:
        model = router.for_task([], task_id="t")
        first = await model.complete(HELLO)
        assert first.route is not None
        assert first.route.endpoint == "local" and first.route.fell_back_from == ["gpu"]
        assert "fell back from gpu" in first.route.reason
        # the episode stays on the endpoint that answered; the dead one is skipped for now,
        # and each turn it serves says it was fallen back from
        second = await model.complete(HELLO)
        assert second.route is not None and second.route.fell_back_from == ["gpu"]
        assert router.is_down(router.endpoints[0])
    finally:
        await router.aclose()

    # Found dead by the probe before any turn: never tried, and still recorded as fallen
    # back from (a job's trajectories show that the fallback served them, and why).
    probed = Router(
        [endpoint("gpu", dead_url, hosted=False), endpoint("local", local.base_url, hosted=False)],
        make_model=quick_client,
    )
    try:
        health = await probed.probe(timeout_s=5)
        assert [h.up for h in health] == [False, True]
        before = len(local.requests)
        turn = await probed.for_task([], task_id="t").complete(HELLO)
        assert turn.route is not None and turn.route.endpoint == "local"
        assert turn.route.fell_back_from == ["gpu"] and "fell back from gpu" in turn.route.reason
        assert len(local.requests) == before + 1
    finally:
        await probed.aclose()

    # A sensitive task whose only self-hosted endpoint is down fails; it does not fall back
    # to the hosted one, which never sees a request.
    strict = Router(
        [endpoint("gpu", dead_url, hosted=False), endpoint("cloud", hosted.base_url, hosted=True)],
        make_model=quick_client,
    )
    try:
        with pytest.raises(
            AllEndpointsDown, match="every endpoint allowed for task 'secret' is down"
        ):
            await strict.for_task(["sensitive"], task_id="secret").complete(HELLO)
    finally:
        await strict.aclose()
    assert hosted.requests == []
