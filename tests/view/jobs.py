"""Job folders as `agentenv eval` writes them (its own writers and models), with the content
a hostile agent and a long job put in them: markup in reasoning and output, long outputs,
odd task names, an errored episode, a trajectory cut off mid-write."""

from __future__ import annotations

from pathlib import Path

from agentenv.agent.loop import new_trajectory
from agentenv.agent.tools import ToolResult
from agentenv.agent.trajectory import Trajectory, Turn
from agentenv.model.types import Completion, Route, ToolCall, Usage
from agentenv.runner.journal import write_json
from agentenv.runner.results import EpisodeResult, JobConfig, append_result
from agentenv.verify import CheckResult, Score

HOSTILE = "</pre><script>alert('x')</script><img src='http://example.com/pixel.png'>"
REASONING = "I should read the CSV first, then fix the parser. " + HOSTILE


def trajectory(task_id: str, passed: bool, turns: int = 2) -> Trajectory:
    traj = new_trajectory(f"Fix {task_id}. {HOSTILE}", task_id=task_id)
    for n in range(turns):
        call = ToolCall(id=f"c{n}", name="bash", arguments='{"command": "seq 1 500"}')
        completion = Completion(
            content=f"turn {n} {HOSTILE}",
            reasoning_content=f"{REASONING} (turn {n})",
            tool_calls=[call],
            usage=Usage(prompt_tokens=1000 + n, cached_tokens=800, completion_tokens=50),
            cost_usd=0.0031,
            retries=n,
            route=Route(endpoint="https://api.moonshot.ai/v1", reason="default"),
        )
        output = "\n".join(str(i) for i in range(1, 501)) + "\n" + HOSTILE
        result = ToolResult(
            call_id=call.id, name="bash", text=output, output=output, exit_code=0, duration_s=0.02
        )
        traj.turns.append(
            Turn(
                completion=completion,
                tool_results=[result],
                model_s=1.5,
                tools_s=0.02,
                paused_s=1.5,
            )
        )
    traj.score = Score(
        reward=1.0 if passed else 0.0,
        passed=passed,
        checks=[
            CheckResult(
                name="tests pass",
                score=1.0 if passed else 0.0,
                passed=passed,
                detail=f"2 passed {HOSTILE}",
            )
        ],
    )
    return traj


def write_job(folder: Path, tasks: list[str], samples: int = 2, cost_usd: float = 0.0062) -> None:
    """A finished eval job: every task × sample, the last task's last sample an error, the
    first task's first trajectory cut off mid-write; each episode costs ``cost_usd``."""
    folder.mkdir(parents=True)
    config = JobConfig(
        model="kimi-k3",
        samples=samples,
        tasks={t: "digest" for t in tasks},
        tags={t: ["python" if i % 2 else "data", "all"] for i, t in enumerate(tasks)},
    )
    write_json(folder / "config.json", config.model_dump())
    for i, task in enumerate(tasks):
        for sample in range(samples):
            passed = (i + sample) % 3 == 0
            relative = f"trajectories/{task}/{sample}.json"
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            traj = trajectory(task, passed)
            path.write_text(traj.model_dump_json())
            errored = i == len(tasks) - 1 and sample == samples - 1
            append_result(
                folder,
                EpisodeResult(
                    task_id=task,
                    sample=sample,
                    outcome="sandbox_lost" if errored else "graded",
                    reward=None if errored else traj.reward,
                    passed=passed and not errored,
                    stop_reason=None if errored else "submitted" if passed else "max_turns",
                    error="SandboxUnavailable: the container died" if errored else None,
                    turns=len(traj.turns),
                    wall_s=3.2,
                    trajectory=relative,
                    score=None if errored else traj.score,
                    prompt_tokens=2001,
                    cached_tokens=1600,
                    completion_tokens=100,
                    cost_usd=cost_usd,
                    phases={"model": 3.0, "tools": 0.04, "verify": 0.16},
                ),
            )
    cut = folder / f"trajectories/{tasks[0]}/0.json"
    cut.write_bytes(cut.read_bytes()[:500])  # killed mid-write


PATCH = """diff --git a/http_util.py b/http_util.py
index 1111111..2222222 100644
--- a/http_util.py
+++ b/http_util.py
@@ -1,3 +1,3 @@
 import json
-def fetch_json(url):
+def get_json(url):
     return json.loads(url)
"""


def write_refactor_job(folder: Path) -> None:
    """A finished refactor job of one repo, as `agentenv refactor` writes it."""
    from agentenv.refactor.job import REPORT, RefactorConfig, RepoResult
    from agentenv.refactor.verdict import TestRun
    from agentenv.runner.journal import append_line

    folder.mkdir(parents=True)
    config = RefactorConfig(
        model="kimi-k3", instruction_sha256="0" * 64, repos={"billing": "repos/billing"},
        max_turns=30, instruction="Rename fetch_json to get_json.",
    )  # fmt: skip
    write_json(folder / "config.json", config.model_dump())
    (folder / "patches").mkdir()
    (folder / "patches" / "billing.patch").write_text(PATCH)
    (folder / "trajectories").mkdir()
    (folder / "trajectories" / "billing.json").write_text(
        trajectory("billing", passed=True).model_dump_json()
    )
    green = TestRun(
        command="python3 -m pytest -q", exit_code=0, passed=3, failed=0, tail="3 passed"
    )
    append_line(
        folder / REPORT,
        RepoResult(
            repo="billing", slug="billing", path="repos/billing", outcome="changed-green",
            before=green, after=green, patch="patches/billing.patch", files_changed=1,
            insertions=1, deletions=1, turns=2,
        ),
    )  # fmt: skip
