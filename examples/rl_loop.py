"""A small GRPO-style loop, offline: the local K3-compatible server plays the policy.

Each step samples a group of rollouts per prompt, forked from one prepared sandbox, and
computes group-relative advantages from the hidden verifier's rewards. The "weights" are a
number the fake policy reads: the higher the version, the more often it answers right, so
rewards climb as the loop "trains". Mid-way, a weight update happens while episodes are in
flight: they are suspended (sandboxes paused, using no CPU), the version is bumped, and they
resume, each turn stamped with the version that produced it.

Run: .venv/bin/python examples/rl_loop.py [--steps 3] [--group 4]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from agentenv import Task, load_task, resume, rollout_group, start
from agentenv.model import OpenAIChatModel
from agentenv.sandbox import cgroup
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn


class FakePolicy:
    """Answers like a model whose accuracy grows with its weight version."""

    def __init__(self) -> None:
        self.version = 1
        self.rng = random.Random(0)

    def accuracy(self) -> float:
        return min(0.95, 0.3 + 0.2 * (self.version - 1))

    def __call__(self, body: dict[str, Any]) -> ScriptedTurn:
        turns = sum(m["role"] == "assistant" for m in body["messages"])
        if turns == 0:
            return ScriptedTurn(
                reasoning="Read the numbers first.",
                tool_calls=[
                    ScriptedToolCall(name="bash", arguments='{"command": "cat numbers.txt"}')
                ],
            )
        seen = body["messages"][-1]["content"]
        total = sum(int(w) for w in seen.split() if w.isdigit())
        if self.rng.random() > self.accuracy():
            total += 1  # a wrong answer
        return ScriptedTurn(
            reasoning=f"The sum is {total}.",
            tool_calls=[
                ScriptedToolCall(
                    name="write_file",
                    arguments=json.dumps({"path": "answer.txt", "content": f"{total}\n"}),
                ),
                ScriptedToolCall(name="submit", arguments="{}"),
            ],
        )


def make_tasks(root: Path, count: int) -> list[Task]:
    """Prompts: sum the numbers in a file (the verifier knows the answer)."""
    rng = random.Random(42)
    tasks = []
    for i in range(count):
        numbers = [rng.randint(1, 99) for _ in range(5)]
        folder = root / f"sum-{i}"
        (folder / "workspace").mkdir(parents=True)
        (folder / "workspace" / "numbers.txt").write_text(" ".join(map(str, numbers)) + "\n")
        (folder / "instruction.md").write_text("Write the sum of numbers.txt to answer.txt.\n")
        (folder / "task.toml").write_text(
            f'[limits]\nmax_turns = 4\n[verifier]\nkind = "file"\npath = "answer.txt"\n'
            f'equals = "{sum(numbers)}"\n'
        )
        tasks.append(load_task(folder))
    return tasks


async def sample_group(
    task: Task, model: OpenAIChatModel, n: int, version: int, rewards: list[float]
) -> None:
    """One group of rollouts forked from one prepared sandbox; collects the rewards."""
    trajs = await rollout_group(task, model, n, policy_version=version)
    rewards.extend(t.reward or 0.0 for t in trajs)


async def main(steps: int, group: int, prompts: int) -> None:
    policy = FakePolicy()
    with tempfile.TemporaryDirectory() as tmp, K3Server(policy, ttft_s=0.3) as server:
        tasks = make_tasks(Path(tmp), prompts)
        model = OpenAIChatModel(base_url=server.base_url, api_key="local")
        for step in range(1, steps + 1):
            started = time.monotonic()
            rewards: list[float] = []
            async with anyio.create_task_group() as tg:
                for task in tasks:
                    tg.start_soon(sample_group, task, model, group, policy.version, rewards)
            took = time.monotonic() - started
            print(
                f"step {step} (weights v{policy.version}): mean reward "
                f"{sum(rewards) / len(rewards):.2f} over {len(rewards)} rollouts, "
                f"{len(rewards) / took:.1f} rollouts/s"
            )
            policy.version += 1  # the "update"

        # A weight update in the middle of episodes: suspend, update, resume.
        handles = [await start(t, model, version=policy.version) for t in tasks]
        for h in handles:
            await h.step()  # one turn with the current weights
            await h.box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        states = [await h.suspend() for h in handles]
        before = [cgroup.cpu_usage_ns(s.sandbox_id) or 0 for s in states]
        await anyio.sleep(1.0)  # the trainer updates the weights; the sandboxes are frozen
        cpu_ms = (
            sum(
                (cgroup.cpu_usage_ns(s.sandbox_id) or 0) - b
                for s, b in zip(states, before, strict=True)
            )
            / 1e6
        )
        policy.version += 1
        print(f"suspended {len(states)} episodes for 1 s during an update: {cpu_ms:.1f} ms of CPU")
        finished = []
        for state in states:
            handle = await resume(state, model, version=policy.version)
            finished.append(await handle.run())
        versions = [[turn.policy_version for turn in t.turns] for t in finished]
        print(f"resumed with v{policy.version}: rewards {[t.reward for t in finished]}")
        print(f"  policy version of each turn: {versions}")
        await model.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=3)
    args = parser.parse_args()
    anyio.run(main, args.steps, args.group, args.prompts)
