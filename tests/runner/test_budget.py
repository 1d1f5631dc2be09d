"""The job budget shared by eval and refactor jobs: an item starts only while the job has
spent less than its cap, counting what earlier runs spent; items refused are counted."""

from __future__ import annotations

import math

import anyio
import pytest

from agentenv.runner.budget import Budget

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]


async def test_items_start_until_the_cap_is_spent() -> None:
    budget = Budget(1.0, spent_usd=0.25)  # a resumed job: an earlier run spent a quarter
    assert await budget.admit() and not budget.exhausted
    budget.spend(0.5)
    assert await budget.admit()
    budget.spend(0.25)  # exactly the cap: spent
    assert budget.exhausted and not budget.stopped
    assert not await budget.admit() and not await budget.admit()
    assert budget.stopped and budget.refused == 2
    assert budget.describe() == "spent $1.0000 of the $1.0000 budget; 2 not started"


async def test_the_gate_counts_a_spend_made_just_before() -> None:
    # a finished item records its spend in another task: the gate yields first, so an item
    # asking at the same moment sees it
    budget = Budget(0.1)
    seen: list[bool] = []

    async def finishing() -> None:
        budget.spend(0.2)

    async def starting() -> None:
        seen.append(await budget.admit())

    async with anyio.create_task_group() as tg:
        tg.start_soon(starting)
        tg.start_soon(finishing)
    assert seen == [False]


async def test_no_cap_never_stops() -> None:
    budget = Budget()
    budget.spend(1e9)
    assert await budget.admit() and not budget.exhausted
    assert budget.describe() == "spent $1000000000.0000 of no cap"


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_a_cap_must_be_dollars(bad: float) -> None:
    with pytest.raises(ValueError, match="a budget must be a number of dollars >= 0"):
        Budget(bad)
