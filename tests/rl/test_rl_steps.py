"""RL rollouts of a multi-step task (Harbor's ``[[steps]]``; prepare() refused them before):
one trajectory over every step's conversation, the trial's reward (the mean of the steps
run, or the final one's), each step's reward in ``score.steps``, a ``min_reward`` gate that
stops the trial, a forked group sharing the prepared state, and a partial rollout suspended
between steps and resumed from JSON. The task is the two-step task of
tests/formats/test_harbor_steps.py (the cookbook's shape, FROM the offline base image); the
steps run through the same machinery as run_task's (agentenv.runner.steps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.agent import policies
from agentenv.agent.trajectory import Trajectory
from agentenv.model.types import ChatModel
from agentenv.rl.rollout import SuspendedRollout, resume, rollout, rollout_group, start
from agentenv.runner.steps import steps_oracle
from agentenv.tasks import Task, load_task
from tests.formats.test_harbor_steps import PLANT, two_steps

pytestmark = pytest.mark.anyio


def _steps(traj: Trajectory) -> list[tuple[str, float, bool]]:
    assert traj.score is not None, traj.error
    return [(s.name, s.reward, s.stopped) for s in traj.score.steps]


def _instructions(traj: Trajectory) -> list[str]:
    return [m["content"] for m in traj.messages if m["role"] == "user"][:2]


def _plant(task: Task) -> ChatModel:
    # step one done right, then a process left behind writing reward files: step two
    # (nothing done) must stay a 0, and the trial's reward the mean, 0.5
    return policies.command(PLANT.removeprefix("command:"))


async def test_a_rollout_scores_every_step_and_the_gate_stops_it(tmp_path: Path) -> None:
    task = load_task(two_steps(tmp_path, "two"))
    traj = await rollout(task, _plant)
    assert traj.error is None, traj.error
    assert _steps(traj) == [("one", 1.0, False), ("two", 0.0, False)]
    assert traj.reward == 0.5
    # one trajectory: each step's instruction opens its own conversation, in order
    assert _instructions(traj) == [
        "Write one to /app/a.txt.\n",
        "Copy /app/seed.txt to /app/b.txt.\n",
    ]
    null = await rollout(task, lambda t: policies.null())
    assert _steps(null) == [("one", 0.0, True)] and null.reward == 0.0  # two never ran
    final = await rollout(
        load_task(two_steps(tmp_path, "final", 'multi_step_reward_strategy = "final"')), _plant
    )
    assert _steps(final) == [("one", 1.0, False), ("two", 0.0, False)] and final.reward == 0.0


async def test_a_forked_group_shares_the_prepared_state(tmp_path: Path) -> None:
    task = load_task(two_steps(tmp_path, "group"))
    given: list[str] = []

    def policy(t: Task) -> ChatModel:  # the oracle, then the planted process
        given.append("oracle" if not given else "plant")
        return steps_oracle(t) if len(given) == 1 else _plant(t)

    group = await rollout_group(task, policy, 2)
    assert all(t.error is None for t in group), [t.error for t in group]
    assert sorted(t.reward or 0.0 for t in group) == [0.5, 1.0]
    assert len({t.group_id for t in group}) == 1
    best = max(group, key=lambda t: t.reward or 0.0)
    assert _steps(best) == [("one", 1.0, False), ("two", 1.0, False)]
    assert best.advantage is not None and best.advantage > 0


async def test_a_partial_rollout_suspended_between_steps(tmp_path: Path) -> None:
    task = load_task(two_steps(tmp_path, "partial"))
    handle = await start(task, steps_oracle)
    while handle.steps is not None and handle.steps.at < 1:
        assert not await handle.step()
    state = SuspendedRollout.model_validate_json((await handle.suspend()).model_dump_json())
    assert state.steps is not None and [s.name for s in state.steps.done] == ["one"]
    again = await resume(state, steps_oracle)
    # a new oracle for the rest: its turns start at step two's
    again.model = policies.ScriptedModel(steps_oracle(task).completions[1:], "oracle")
    while not await again.step():
        pass
    traj = await again.finish()
    assert _steps(traj) == [("one", 1.0, False), ("two", 1.0, False)], traj.score
    assert traj.reward == 1.0 and len(_instructions(traj)) == 2
