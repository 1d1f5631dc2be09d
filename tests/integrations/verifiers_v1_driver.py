"""Run in the verifiers-v1 venv (``scripts/verifiers_venv.sh verifiers-v1``) by
tests/integrations/test_verifiers_v1.py: agentenv's ``verifiers.v1`` taskset and harness,
loaded by id and run by verifiers 0.4.0's own eval runner (``run_eval``, what ``vf-eval``
runs) against agentenv's scripted K3 server, one server and one eval run per scenario:

* ``solve``: a call to a tool that does not exist (answered as an error), the solution, submit;
* ``wrong``: a wrong answer, submit;
* ``fail``: one tool call, then the endpoint answers 500 (the rollout fails mid-way);
* ``group``: the ``solve`` script, 2 rollouts of the task at once, each its own sandbox;
* ``broken``: the task at ``BROKEN_FOLDER``, whose setup fails: the episode never opens;
* ``capped``: the ``solve`` script under verifiers' own ``max_turns`` of 1 (its interception
  refuses the second call);
* ``timeout``: one tool call, then the endpoint stalls past verifiers' rollout timeout (4 s
  against a 60 s stall): ``launch`` is cancelled mid-call.

``python verifiers_v1_driver.py TASK_FOLDER BROKEN_FOLDER OUT_DIR`` prints one JSON object:
per scenario each trace's reward, rewards, error, stop condition, turns, agentenv outcome
(from the run's traces.jsonl: its trajectory's keys),
and the state of the run's sandboxes (labelled ``AGENTENV_RUN_ID``) at each model request.
Run it from outside agentenv's checkout (its verifiers/ folder would shadow the package).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import docker
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig

from agentenv.integrations import verifiers_v1
from agentenv.sandbox.container.freezing import seen_status
from agentenv.sandbox.labels import RUN
from agentenv.testing import Fault, K3Server, ScriptedToolCall, ScriptedTurn


def call(name: str, **args: Any) -> ScriptedToolCall:
    """A scripted tool call."""
    return ScriptedToolCall(name=name, arguments=json.dumps(args))


ROLLOUTS = {"group": 2}  # rollouts per task; 1 for the others

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
SCRIPTS["capped"] = SCRIPTS["solve"]
SCRIPTS["timeout"] = SCRIPTS["fail"]

AGENT = {"capped": {"max_turns": 1}, "timeout": {"timeout": {"rollout": 4}}}
"""verifiers' own agent settings per scenario (none for the others)."""

FAULTS = {"fail": Fault(kind="500"), "timeout": Fault(kind="stall", stall_s=60)}
"""What the endpoint does to every request after the first, per scenario."""


def box_states() -> list[str]:
    """The state of each container of this run ("paused" when its cgroup is frozen, which
    the engine calls "running"; "running"; ...): while the policy generates, only the
    episodes' sandboxes exist (checker sandboxes run at an episode's end)."""
    api = docker.from_env().api
    found = api.containers(all=True, filters={"label": f"{RUN}={os.environ['AGENTENV_RUN_ID']}"})
    return sorted(seen_status(c["Id"], c["State"]) for c in found)


async def scenario(name: str, folder: str, out_dir: Path) -> dict[str, Any]:
    """The traces of one eval run of ``name``'s script on the task at ``folder``."""
    turns = SCRIPTS[name]
    seen: list[list[str]] = []

    def script(body: dict[str, Any]) -> ScriptedTurn:
        seen.append(box_states())  # while the model "generates"
        done = sum(m["role"] == "assistant" for m in body["messages"])
        return turns[min(done, len(turns) - 1)]

    def faults(body: dict[str, Any]) -> Fault | None:
        done = sum(m["role"] == "assistant" for m in body["messages"])
        return FAULTS.get(name) if done >= 1 else None

    with K3Server(script, faults=faults) as server:
        config = EvalConfig.model_validate(
            {
                "env": {
                    # by id, as vf-eval's and prime-rl's configs name a taskset
                    "taskset": {"id": verifiers_v1.PLUGIN_ID, "tasks": [folder]},
                    "agent": {
                        "runtime": {"type": "subprocess"},
                        **AGENT.get(name, {}),
                        # the taskset's own harness (the default when unset), pinned
                        # here to take its knobs
                        "harness": {"id": verifiers_v1.PLUGIN_ID, "backend": "docker"},
                    },
                },
                "model": "kimi-k3",
                "client": {"base_url": server.base_url, "api_key_var": "K3_TEST_KEY"},
                "num_rollouts": ROLLOUTS.get(name, 1),
                "rich": None,
                "push": False,
                "output_dir": str(out_dir),
                "run": {"dir": name},
            }
        )
        episodes = await run_eval(config)
    traces = [t for e in episodes for t in e.traces]
    first = traces[0]
    # the outcome as the trainer gets it: the run's traces.jsonl
    with (out_dir / name / "traces.jsonl").open() as lines:
        wire = [t for line in lines for t in json.loads(line)["traces"]]
    outcome = wire[0]["info"].get("agentenv")
    return {
        "harness": first.agent.config.harness.id if first.agent else None,
        "reward": first.reward,
        "rewards": [t.reward for t in traces],
        "trace_rewards": first.rewards,
        "error": first.last_error.model_dump(mode="json") if first.last_error else None,
        "stop_condition": first.stop_condition,
        "outcome": outcome and {k: v for k, v in outcome.items() if k != "trajectory"},
        "trajectory": outcome and outcome["trajectory"] and sorted(outcome["trajectory"]),
        "turns": first.num_turns,
        "states_at_requests": seen,
        "left_after": box_states(),
    }


def plain(value: Any) -> Any:
    """A verifiers record (a pydantic model, e.g. a trace's ``Reward``) as JSON."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if dump else str(value)


async def main(folder: str, broken: str, out_dir: str) -> None:
    """Every scenario, the JSON on stdout."""
    os.environ["K3_TEST_KEY"] = "unused"  # the scripted server takes any key
    # an install without the top-level module agentenv_verifiers: this process finds it by id
    verifiers_v1.register()
    result = {
        name: await scenario(name, broken if name == "broken" else folder, Path(out_dir))
        for name in SCRIPTS
    }
    print(json.dumps(result, default=plain))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
