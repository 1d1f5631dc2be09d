"""A sandbox is the fault: in the middle of a job, one task's agent fills its workdir (2 GiB,
more than it may hold) and floods its output. That episode is graded, failed; the others
pass; the engine's disk and the host are unharmed (the workdir is a bounded tmpfs volume,
output is capped)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.faults.engine import PrivateEngine
from tests.faults.scenario import TTFT_S, Job, make_tasks, settle, three_turns

TASKS, SAMPLES = 4, 2
HOG = "head -c 3G /dev/zero > big; yes 'flood' | head -c 300000000; df -h ."


def hogging(body: dict[str, Any]) -> ScriptedTurn:
    """``three_turns``, but greet-0's agent first fills its disk and floods its output."""
    turn = three_turns(body)
    first = not any(m["role"] == "assistant" for m in body["messages"])
    if first and "'hello greet-0'" in json.dumps(body["messages"]):
        call = ScriptedToolCall(name="bash", arguments=json.dumps({"command": HOG}))
        return ScriptedTurn(reasoning="Fill it.", tool_calls=[call])
    return turn


def test_a_sandbox_filling_its_disk_and_flooding_output(
    engine: PrivateEngine, tmp_path: Path
) -> None:
    tasks = make_tasks(tmp_path / "tasks", TASKS)
    free = shutil.disk_usage(engine.data).free
    with K3Server(hogging, ttft_s=TTFT_S) as server:
        job = Job(engine, server, tasks, tmp_path / "job", samples=SAMPLES)
        code = job.run(timeout=600)
    assert code == 0, job.outputs[-1][1][-2000:]
    assert free - shutil.disk_usage(engine.data).free < 200 << 20  # the engine's disk
    settle(
        "a sandbox fills its workdir and floods output", job, TASKS, SAMPLES, b"",
        failing=frozenset({"greet-0"}),
    )  # fmt: skip
