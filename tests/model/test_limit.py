"""The adaptive concurrency limit: slow start, halved on 429s (once per burst), and it really
bounds the requests in flight to an endpoint."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from agentenv.model import OpenAIChatModel
from agentenv.model.limit import AdaptiveLimit
from agentenv.testing import Fault, K3Server, ScriptedTurn

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]


def test_slow_start_then_halving_once_per_burst() -> None:
    limit = AdaptiveLimit(2, maximum=64)
    for _ in range(6):
        limit.succeeded()
    assert limit.capacity == 8  # +1 per success below the threshold
    generation = limit.generation
    limit.rate_limited(generation)
    limit.rate_limited(generation)  # the same burst: ignored
    assert limit.capacity == 4 and limit.threshold == 4
    limit.succeeded()  # above the threshold: additive increase, 1/limit per success
    assert limit.capacity == 4 and limit.limit == pytest.approx(4.25)
    for _ in range(10):
        limit.rate_limited(limit.generation)
    assert limit.capacity == 1  # never below the minimum
    with pytest.raises(ValueError, match="minimum"):
        AdaptiveLimit(0)


async def test_requests_in_flight_stay_under_the_limit() -> None:
    in_flight, peak = 0, 0
    lock = threading.Lock()

    def script(body: dict[str, Any]) -> ScriptedTurn:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.2)
        with lock:
            in_flight -= 1
        return ScriptedTurn(reasoning="r", content="ok")

    limit = AdaptiveLimit(2, maximum=2)
    with K3Server(script) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="k", limit=limit)
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(model.complete, [{"role": "user", "content": "x"}])
        finally:
            await model.aclose()
    assert peak == 2
    assert limit.in_flight == 0


async def test_429s_shrink_the_shared_limit_and_queueing_is_not_working_time() -> None:
    limit = AdaptiveLimit(8)
    faults: list[Fault | None] = [Fault(kind="429", retry_after_s=0.3)]
    with K3Server([ScriptedTurn(reasoning="r", content="ok")], faults=faults) as server:
        model = OpenAIChatModel(
            base_url=server.base_url, api_key="k", limit=limit, backoff_initial_s=0.01
        )
        try:
            done = await model.complete([{"role": "user", "content": "x"}])
        finally:
            await model.aclose()
    assert done.retries == 1
    assert limit.threshold == 4  # halved by the 429, then one success added one
    assert limit.capacity == 4
    assert done.queued_s >= 0.3  # the Retry-After wait is queueing, not the model working
