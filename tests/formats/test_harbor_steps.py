"""Harbor's multi-step tasks (``[[steps]]``) run (they were refused at load): one sandbox for
the whole trial, each step's workdir/ and setup.sh, its instruction in a new conversation,
its tests (the task's tests/ merged under the step's) and its reward; a ``min_reward`` gate
stops the trial; the task's reward is the mean or the final step's. The task here mirrors
Harbor's cookbook ``multi-step`` (shared tests/helpers.sh, a step's workdir/ with a
self-deleting setup.sh, a step's verifier env), FROM the offline base image; the cookbook's
own task runs in test_harbor_steps_more.py (with its steps' artifacts), its FROM rewritten."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentenv.agent.loop import new_trajectory
from agentenv.cli.render import summary_line
from agentenv.errors import TaskError
from agentenv.runner.episode import prepare, run_task
from agentenv.runner.policy import Policies
from agentenv.runner.steps import below, trial_score
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task
from agentenv.verify import Score
from agentenv.verify.score import CheckResult, StepScore
from agentenv.view.pages import _checks

pytestmark = pytest.mark.anyio

COOKBOOK = Path(__file__).parent / "harbor_tasks" / "cookbook.tar.gz"

TOML = """\
schema_version = "1.1"
{strategy}
[task]
name = "tests/two-steps"

[verifier]
timeout_sec = 60.0

[environment]
cpus = 1
memory_mb = 1024

[[steps]]
name = "one"
min_reward = 1.0

[steps.agent]
timeout_sec = 60.0

[[steps]]
name = "two"

[steps.verifier.env]
EXPECT = "seeded"
"""

FILES = {
    "environment/Dockerfile": f"FROM {BASE_IMAGE}\nWORKDIR /app\n",
    "tests/helpers.sh": 'reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }\n',
    "steps/one/instruction.md": "Write one to /app/a.txt.\n",
    "steps/one/tests/test.sh": """\
        source /tests/helpers.sh
        [ "$(cat /app/a.txt 2>/dev/null)" = one ] && reward 1
        reward 0
        """,
    "steps/one/solution/solve.sh": "echo one > /app/a.txt\n",
    "steps/two/instruction.md": "Copy /app/seed.txt to /app/b.txt.\n",
    "steps/two/workdir/seed.txt": "seeded\n",
    "steps/two/workdir/setup.sh": 'echo set > /app/setup-ran\nrm -- "$0"\n',
    "steps/two/tests/test.sh": """\
        source /tests/helpers.sh
        [ "$(cat /app/b.txt 2>/dev/null)" = "$EXPECT" ] || reward 0
        [ -f /app/setup-ran ] && [ ! -e /app/setup.sh ] && [ "$(cat /app/a.txt)" = one ] && reward 1
        reward 0
        """,
    "steps/two/solution/solve.sh": "cp /app/seed.txt /app/b.txt\n",
}


def two_steps(root: Path, name: str, strategy: str = "") -> Path:
    folder = root / name
    for path, text in FILES.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(textwrap.dedent(text))
    (folder / "task.toml").write_text(TOML.format(strategy=strategy))
    return folder


async def _run(folder: Path, policy: str) -> Score:
    task = load_task(folder)
    policies = Policies(policy)
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None
    return traj.score


def _steps(score: Score) -> list[tuple[str, float, bool]]:
    return [(s.name, s.reward, s.stopped) for s in score.steps]


async def test_oracle_passes_every_step_and_null_is_stopped_by_the_gate(tmp_path: Path) -> None:
    folder = two_steps(tmp_path, "two")
    task = load_task(folder)
    assert task.multi_step is not None and task.multi_step.reward == "mean"
    one, two = task.multi_step.steps
    assert (one.min_reward, one.wall_time_s, two.verifier_env) == (1.0, 60.0, {"EXPECT": "seeded"})
    oracle = await _run(folder, "oracle")
    assert oracle.error is None and oracle.reward == 1.0, oracle
    assert _steps(oracle) == [("one", 1.0, False), ("two", 1.0, False)]
    null = await _run(folder, "null")
    assert null.reward == 0.0 and null.error is None
    assert _steps(null) == [("one", 0.0, True)]  # step two never ran
    assert "below its min_reward 1" in null.steps[0].detail


# step one done right, a process left behind that keeps writing reward files: step two
# (nothing done) must stay a 0, not the planted 1
PLANT = (
    "command:echo one > /app/a.txt; mkdir -p /logs/verifier; "
    "nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' "
    ">/dev/null 2>&1 &"
)


@pytest.mark.parametrize(("strategy", "reward"), [("mean", 0.5), ("final", 0.0)])
async def test_reward_is_the_mean_or_the_final_step(
    tmp_path: Path, strategy: str, reward: float
) -> None:
    folder = two_steps(tmp_path, strategy, f'multi_step_reward_strategy = "{strategy}"')
    score = await _run(folder, PLANT)
    assert _steps(score) == [("one", 1.0, False), ("two", 0.0, False)], score
    assert score.reward == reward and score.error is None


def test_a_failed_verifier_is_below_any_gate_and_the_task_an_error() -> None:
    ok = Score(reward=1.0, passed=True, checks=[CheckResult(name="reward", score=1.0, passed=True)])
    broken = Score(reward=0.0, passed=False, error="no reward file")
    assert below(ok, 1.0) is None and below(ok, None) is None
    assert below(ok, {"reward": 1.0, "style": 0.5}) == "style = -inf is below its min_reward 0.5"
    assert below(broken, None) is not None  # no gate: still stops
    done = [
        (StepScore(name="a", reward=1.0, passed=True), ok),
        (StepScore(name="b", reward=0.0, passed=False, error="no reward file"), broken),
    ]
    assert trial_score(done, "mean").error == "step 'b': no reward file"
    assert trial_score(done[:1], "final").reward == 1.0
    # each step shown: `agentenv run`'s summary line and the viewer's episode page
    traj = new_trajectory("x")
    traj.score = trial_score(
        [
            (StepScore(name="a", reward=1.0, passed=True), ok),
            (StepScore(name="b", reward=0.25, passed=False, stopped=True), None),
        ],
        "mean",
    )
    assert "steps: a 1.00, b 0.25 (stopped)" in summary_line(traj)
    assert "<td>b</td><td>0.25</td><td>stopped the task</td>" in _checks(traj.score)


async def test_other_drivers_refuse_a_multi_step_task(tmp_path: Path) -> None:
    task = load_task(two_steps(tmp_path, "rl"))
    with pytest.raises(TaskError, match="has steps: only run_task and the RL rollouts run them"):
        await prepare(task)  # refactor jobs, regrading: never as one step


def _refused(folder: Path) -> str:
    with pytest.raises(TaskError) as e:
        load_task(folder)
    return str(e.value)


def test_step_fields_not_run_are_refused_by_name(tmp_path: Path) -> None:
    folder = two_steps(tmp_path, "bad", 'multi_step_reward_strategy = "max"')
    toml = folder / "task.toml"
    toml.write_text(toml.read_text() + '\n[steps.agent]\nuser = "bob"\n')
    (folder / "steps" / "two" / "instruction.md").unlink()
    said = _refused(folder)
    assert "multi_step_reward_strategy: 'max' is not one of mean, final" in said
    assert "steps[1].agent.user: a step's own agent user is not supported" in said
    assert "steps/two/instruction.md: not found" in said
