"""Run in the verifiers venv (scripts/verifiers_venv.sh) by tests/integrations/test_verifiers.py:
agentenv's verifiers environment, driven by verifiers' own ``Environment.evaluate`` against
agentenv's scripted K3 server, one server per scenario:

* ``solve``: a call to a tool that does not exist (answered as an error), the solution, submit;
* ``wrong``: a wrong answer, submit;
* ``fail``: one tool call, then the endpoint answers 500 (the rollout fails mid-way);
* ``group``: the ``solve`` script, a group of 2 rollouts at once (verifiers' ``run_group``),
  each in its own sandbox;
* ``broken``: the task at ``BROKEN_FOLDER``, whose setup fails: the episode never opens.

``python verifiers_driver.py TASK_FOLDER BROKEN_FOLDER`` prints one JSON object: per
scenario the rollout's reward, error, stop condition, outcome, completion, the state of every
open episode's sandbox at each model request, and how many episodes are open after it.
Run it from outside agentenv's checkout (its verifiers/ folder would shadow the package).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import docker
from openai import AsyncOpenAI

import verifiers as vf
from agentenv.integrations.verifiers import AgentenvEnv
from agentenv.sandbox.container.freezing import seen_status
from agentenv.testing import Fault, K3Server, ScriptedToolCall, ScriptedTurn


def call(name: str, **args: Any) -> ScriptedToolCall:
    """A scripted tool call."""
    return ScriptedToolCall(name=name, arguments=json.dumps(args))


ROLLOUTS = {"group": 2}  # rollouts per example; 1 for the others

SCRIPTS: dict[str, list[ScriptedTurn]] = {
    "solve": [
        ScriptedTurn(reasoning="Try a tool.", tool_calls=[call("nope", x=1)]),
        ScriptedTurn(
            reasoning="Write it.", tool_calls=[call("bash", command="echo ok > answer.txt")]
        ),
        ScriptedTurn(reasoning="Done.", tool_calls=[call("submit", summary="wrote ok")]),
    ],
    "wrong": [
        ScriptedTurn(reasoning="Write.", tool_calls=[call("bash", command="echo no > answer.txt")]),
        ScriptedTurn(reasoning="Done.", tool_calls=[call("submit", summary="wrote no")]),
    ],
    "fail": [
        ScriptedTurn(reasoning="Write.", tool_calls=[call("bash", command="echo ok > answer.txt")]),
        ScriptedTurn(reasoning="Done.", tool_calls=[call("submit", summary="wrote ok")]),
    ],
}
SCRIPTS["group"] = SCRIPTS["solve"]
SCRIPTS["broken"] = SCRIPTS["solve"]


def box_states(env: AgentenvEnv) -> list[str]:
    """The state of each open episode's sandbox ("paused" when its cgroup is frozen, which
    the engine calls "running"; "running"; ...)."""
    api = docker.from_env().api
    # the test reads the sandbox behind the episode: no public name gives its container
    ids = [e._rollout.box.id for e in list(env._episodes.values())]
    return [seen_status(i, api.inspect_container(i)["State"]["Status"]) for i in ids]


async def scenario(env: AgentenvEnv, name: str) -> dict[str, Any]:
    """One rollout of ``name``'s script through ``env.evaluate``."""
    turns = SCRIPTS[name]
    seen: list[list[str]] = []

    def script(body: dict[str, Any]) -> ScriptedTurn:
        seen.append(box_states(env))  # while the model "generates"
        done = sum(m["role"] == "assistant" for m in body["messages"])
        return turns[min(done, len(turns) - 1)]

    def faults(body: dict[str, Any]) -> Fault | None:
        done = sum(m["role"] == "assistant" for m in body["messages"])
        return Fault(kind="500") if name == "fail" and done >= 1 else None

    with K3Server(script, faults=faults) as server:
        client = vf.OpenAIChatCompletionsClient(
            AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        )
        out = await env.evaluate(
            client=client,
            model="kimi-k3",
            num_examples=1,
            rollouts_per_example=ROLLOUTS.get(name, 1),
            state_columns=["agentenv"],
        )
    row = out["outputs"][0]
    return {
        "reward": row["reward"],
        "rewards": [r["reward"] for r in out["outputs"]],
        "error": row.get("error"),
        "stop_condition": row.get("stop_condition"),
        "outcome": row.get("agentenv"),
        "metrics": row.get("metrics"),
        "completion": row["completion"],
        "states_at_requests": seen,
        "open_after": env.open_episodes,
    }


def plain(value: Any) -> Any:
    """A verifiers message (a pydantic model; outputs mix them with dicts) as JSON."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if dump else str(value)


def environment(folder: str) -> AgentenvEnv:
    """The environment of the task at ``folder``, by env id and args, as a trainer's config
    names an environment."""
    env = vf.load_environment("agentenv.integrations.verifiers", tasks=folder, backend="docker")
    assert isinstance(env, AgentenvEnv)
    return env


async def main(folder: str, broken: str) -> None:
    """Every scenario (on one environment of the task at ``folder``, ``broken`` on one of
    the task at ``broken``); the JSON on stdout."""
    env, bad = environment(folder), environment(broken)
    result = {name: await scenario(bad if name == "broken" else env, name) for name in SCRIPTS}
    print(json.dumps(result, default=plain))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1], sys.argv[2]))
