"""Prompt-cache benchmark: the share of input tokens a 20-turn episode gets from the prefix
cache, on the local K3-compatible server.

A provider bills cached input tokens at a fraction of the price, and caches only a prefix
that is byte for byte the one it saw before: the loop must send an append-only history with
the same tools every turn (and replay each assistant turn, ``reasoning_content`` included,
exactly as it came). The local server counts cached tokens as the prefix a request shares
with the one before it, over the tools and each message as sent, so what it reports is what
the loop's history allows. One episode, 20 turns, each running a command whose output is a
few hundred tokens (reading a file, running tests), as a coding agent's turns do.

Printed: input, cached and output tokens, the episode's cache hit rate (target ≥ 90%), the
per-turn rates from the second turn on, and, for comparison, the ceiling of this workload:
the hit rate if everything but the newest turn were cached.

Usage: ``.venv/bin/python bench/cache_hit.py [--turns N]``.
"""

from __future__ import annotations

import argparse
import json

import anyio

from agentenv.agent.loop import Limits, run_episode
from agentenv.model import OpenAIChatModel
from agentenv.model.endpoints import resolve_endpoint
from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import DockerSandbox
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn


def script(turns: int) -> list[ScriptedTurn]:
    """``turns - 1`` turns that each run a command, then a submit."""
    out = []
    for i in range(turns - 1):
        command = f"seq {i * 40} {i * 40 + 120} | sed 's/^/line /'"  # ~120 lines of output
        out.append(
            ScriptedTurn(
                reasoning=f"Step {i}: look at the next part of the output before editing.",
                tool_calls=[
                    ScriptedToolCall(name="bash", arguments=json.dumps({"command": command}))
                ],
            )
        )
    out.append(
        ScriptedTurn(
            reasoning="Done.",
            tool_calls=[ScriptedToolCall(name="submit", arguments='{"summary": "done"}')],
        )
    )
    return out


async def main(turns: int) -> None:
    """Run the episode and print the figures."""
    with K3Server(script(turns)) as server:
        model = OpenAIChatModel.for_endpoint(resolve_endpoint(server.base_url))
        async with await DockerSandbox.create(SandboxSpec()) as box:
            traj = await run_episode(
                model,
                box,
                "Read the numbered lines part by part, then submit.",
                limits=Limits(max_turns=turns + 1),
            )
    rates = [
        t.completion.usage.cached_tokens / t.completion.usage.prompt_tokens
        for t in traj.turns[1:]
        if t.completion.usage.prompt_tokens
    ]
    prompts = [t.completion.usage.prompt_tokens for t in traj.turns]
    ceiling = sum(prev for prev in prompts[:-1]) / sum(prompts) if sum(prompts) else 0.0
    print(f"episode: {len(traj.turns)} turns, stop: {traj.stop_reason}")
    print(
        f"tokens: input {traj.prompt_tokens:,}, cached {traj.cached_tokens:,}, "
        f"output {traj.completion_tokens:,}"
    )
    print(f"cache hit rate: {traj.cache_hit_rate:.1%} of input tokens (target >= 90%)")
    if rates:
        print(f"per turn from the 2nd: min {min(rates):.1%}, mean {sum(rates) / len(rates):.1%}")
    print(f"ceiling of this workload (all but each turn's newest tokens cached): {ceiling:.1%}")
    print(f"hit rate / ceiling: {traj.cache_hit_rate / ceiling:.3f}" if ceiling else "")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    anyio.run(main, parser.parse_args().turns)
