"""100 concurrent rollouts against a slow simulated model: all complete, and their sandboxes
spend most of the time paused (the fraction is printed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agentenv.model import OpenAIChatModel
from agentenv.model.limit import AdaptiveLimit
from agentenv.rl.rollout import rollout
from agentenv.testing import K3Server, ScriptedTurn
from tests.rl.test_rollouts import make_task, two_turns

pytestmark = pytest.mark.anyio


async def test_hundred_concurrent_rollouts_are_mostly_paused(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    script = two_turns("ok")

    def answer(body: dict[str, Any]) -> ScriptedTurn:
        turns = sum(m["role"] == "assistant" for m in body["messages"])
        return script[min(turns, 1)]

    results = []
    with K3Server(answer, ttft_s=1.5, tokens_per_s=400) as server:
        # one client for all: its adaptive limit starts at 128 so all 100 can be in flight
        model = OpenAIChatModel(
            base_url=server.base_url, api_key="k", limit=AdaptiveLimit(128, maximum=256)
        )

        async def one() -> None:
            results.append(await rollout(task, model))

        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(one)
        await model.aclose()
    assert len(results) == 100
    assert all(t.reward == 1.0 and len(t.turns) == 2 for t in results)
    paused = sum(t.paused_s for t in results) / sum(t.wall_s for t in results)
    print(f"\n100 rollouts: sandboxes paused {paused:.0%} of their episode time")
    assert paused > 0.5
