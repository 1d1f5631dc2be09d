"""Injected faults on the local K3 server: transient ones are retried (and counted), the
rest fail at once with the right error."""

from __future__ import annotations

import time

import pytest

from agentenv.errors import (
    AuthError,
    BadRequest,
    EndpointUnavailable,
    ModelError,
    RateLimited,
    StreamCut,
)
from agentenv.model import ContextOverflow
from agentenv.runner.outcomes import classify
from agentenv.testing import Fault, K3Server, ScriptedTurn
from tests.helpers import HISTORY_WITHOUT_REASONING, chat_model, serving

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]

ANSWER = [ScriptedTurn(reasoning="thinking", content="the answer")]
HELLO = [{"role": "user", "content": "hello"}]


async def _complete(server: K3Server, transport: str = "http", **kwargs: object) -> object:
    chat = chat_model(server, transport, backoff_initial_s=0.01, backoff_max_s=0.05, **kwargs)
    try:
        return await chat.complete(HELLO)
    finally:
        await chat.aclose()


@pytest.mark.parametrize("kind", ["500", "503", "cut"])
async def test_transient_failures_are_retried_and_counted(kind: str, transport: str) -> None:
    faults = [Fault(kind=kind), Fault(kind=kind)]  # type: ignore[arg-type]
    with serving(K3Server(ANSWER, faults=faults), transport) as server:
        done = await _complete(server, transport)
    assert done.content == "the answer"  # type: ignore[attr-defined]
    assert done.retries == 2  # type: ignore[attr-defined]
    assert len(server.requests) == 3


async def test_rate_limit_honours_retry_after(transport: str) -> None:
    faults = [Fault(kind="429", retry_after_s=0.6)]
    with serving(K3Server(ANSWER, faults=faults), transport) as server:
        started = time.monotonic()
        done = await _complete(server, transport)
        waited = time.monotonic() - started
    assert done.retries == 1  # type: ignore[attr-defined]
    # Our own backoff here is at most 0.05 s: only the server's Retry-After explains this.
    assert waited >= 0.6


async def test_stall_past_the_timeout_is_retried() -> None:
    # over HTTP only: the read timeout is the socket's
    with K3Server(ANSWER, faults=[Fault(kind="stall", stall_s=3)]) as server:
        done = await _complete(server, timeout_s=0.5)
    assert done.content == "the answer" and done.retries == 1  # type: ignore[attr-defined]


async def test_retries_are_bounded(transport: str) -> None:
    with (
        serving(K3Server(ANSWER, faults=[Fault(kind="500")] * 5), transport) as server,
        pytest.raises(EndpointUnavailable),
    ):
        await _complete(server, transport, max_attempts=3)
    assert len(server.requests) == 3


async def test_bad_request_is_not_retried(transport: str) -> None:
    with serving(K3Server(ANSWER), transport) as server:
        chat = chat_model(server, transport, backoff_initial_s=0.01)
        try:
            with pytest.raises(BadRequest):
                await chat.complete(HISTORY_WITHOUT_REASONING)
        finally:
            await chat.aclose()
    assert len(server.requests) == 1


async def test_context_overflow_is_its_own_error_and_not_retried(transport: str) -> None:
    with serving(K3Server(ANSWER, context_window=50), transport) as server:
        chat = chat_model(server, transport, backoff_initial_s=0.01)
        try:
            with pytest.raises(ContextOverflow, match="exceeded model token limit"):
                await chat.complete([{"role": "user", "content": "long " * 200}])
        finally:
            await chat.aclose()
    assert len(server.requests) == 1


async def test_a_storm_of_rate_limits_is_waited_out_not_counted(transport: str) -> None:
    # more 429s than attempts: a rate limit is the endpoint saying "later", not "down"
    storm = [Fault(kind="429", retry_after_s=0.01)] * 8
    with serving(K3Server(ANSWER, faults=list(storm)), transport) as server:
        done = await _complete(server, transport, max_attempts=3)
    assert done.retries == 8  # type: ignore[attr-defined]
    # ... for as long as the client is told to wait, then it is one
    with (
        serving(K3Server(ANSWER, faults=[*storm, *storm]), transport) as server,
        pytest.raises(RateLimited),
    ):
        await _complete(server, transport, max_attempts=3, rate_limit_wait_s=0.05)
    assert len(server.requests) < 16
    # told to wait longer than the client may: it says so at once, without sleeping
    with (
        serving(
            K3Server(ANSWER, faults=[Fault(kind="429", retry_after_s=3600)]), transport
        ) as server,
        pytest.raises(RateLimited),
    ):
        started = time.monotonic()
        await _complete(server, transport, rate_limit_wait_s=5)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("faults", "kind", "outcome", "requests"),
    [
        (["401"], AuthError, "auth", 1),
        (["403"], AuthError, "auth", 1),
        (["500"] * 3, EndpointUnavailable, "endpoint_down", 3),
        (["429"], RateLimited, "endpoint_down", 1),  # with no time to wait rate limits out
        (["cut"] * 3, StreamCut, "endpoint_down", 3),
    ],
)
async def test_every_failure_comes_out_as_our_kind_with_the_sdks_as_cause(
    faults: list[str], kind: type[ModelError], outcome: str, requests: int, transport: str
) -> None:
    # Nothing above the client needs openai's exceptions: the kind decides the outcome.
    injected = [Fault(kind=f) for f in faults]  # type: ignore[arg-type]
    with (
        serving(K3Server(ANSWER, faults=injected), transport) as server,
        pytest.raises(kind) as caught,
    ):
        await _complete(server, transport, max_attempts=3, rate_limit_wait_s=0)
    assert len(server.requests) == requests  # refusals are not retried
    assert classify(caught.value) == outcome
    if kind is not StreamCut:  # a cut stream is ours from the start
        assert type(caught.value.__cause__).__module__.startswith("openai")
        assert caught.value.status_code == int(faults[0])
