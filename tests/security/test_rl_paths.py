"""Attacks through the RL and eval paths: ``rollout``, ``rollout_group`` (the cheater must not
get a positive advantage; a sample whose output would make host-side parsing raise must not
take its group down), ``stream`` (every rollout delivered), and the eval runner, whose
recorded outcome must be "graded"."""

from __future__ import annotations

from pathlib import Path

import agentenv
from agentenv.agent.loop import Trajectory
from agentenv.agent.policies import oracle
from agentenv.eval.jobs import run_eval
from agentenv.model.types import ChatModel
from agentenv.runner.policy import Policies
from agentenv.runner.results import EpisodeResult, load_results
from agentenv.runner.retries import EpisodeSettings, run_episode_with_retries
from agentenv.tasks import Task
from tests.security.harness import (
    SCRIPT_TIMEOUT_S,
    Battery,
    assert_graded,
    cheat_policy,
    describe,
    first_cheats,
    heredoc,
    is_cheater,
    scenario,
    task,
)
from tests.security.payloads import JUNIT_BOMB_MODULE, KILL_KEEPALIVE, MONKEYPATCH_INTERVALS

N = 4
KILL_EVERYTHING = "#!/bin/bash\nkill -9 -1 2>/dev/null\nsleep 1\necho still here\n"
JSON_BOMB = (
    "#!/bin/bash\n"
    "python3 -c \"open('report.json', 'w').write('[' * 100000 + ']' * 100000)\"\n"
    "wc -c report.json\n"
)
# For `run_eval`, one `command:` policy for every task: every workspace file becomes a FIFO
# (report.json too), then every process the agent may signal is killed, the keep-alive too.
SABOTAGE = (
    'cd /workspace 2>/dev/null; for f in * .[!.]*; do [ -e "$f" ] && rm -rf "$f" '
    '&& mkfifo "$f"; done; mkfifo report.json 2>/dev/null; kill -9 -1 2>/dev/null; sleep 1'
)


def assert_group(group: list[Trajectory], null_reward: float, what: str) -> None:
    """Every sample came back, graded, with the null reward; exactly one cheated."""
    assert len(group) == N, f"{what}: {len(group)} of {N} samples came back"
    cheaters = [t for t in group if is_cheater(t)]
    assert len(cheaters) == 1, f"{what}: {len(cheaters)} cheaters among {N}"
    for i, traj in enumerate(group):
        assert_graded(traj, f"{what}, sample {i}")
        assert traj.reward == null_reward, f"{what}, sample {i}: {describe(traj)}"


# -- rollout -------------------------------------------------------------------------------


@scenario("test_rl_rollout_kill_everything", "duration-parser")
async def _rollout(tmp: Path) -> Trajectory:
    return await agentenv.rollout(task("duration-parser"), cheat_policy(KILL_EVERYTHING, tmp))


def test_rl_rollout_kill_everything(battery: Battery) -> None:
    traj = battery.result("test_rl_rollout_kill_everything")
    assert_graded(traj, "rollout")
    assert traj.reward == battery.null_reward("duration-parser"), describe(traj)


# memory exhausted in the agent's own sandbox, by a process left running while its tool
# call hogs too, and by the agent's code when the check runs it (its first case): the
# kernel kills the hogs, never the sandbox, and the episode is graded (0, not None)
MEMORY_HOG = """#!/bin/bash
python3 -c 'x = []
while True: x.append(b"x" * (64 << 20))' &
python3 -c 'x = []
while True: x.append(b"y" * (64 << 20))'
cat > durations.py <<'PY'
import os

if os.path.exists("hog"):  # once: the check's first case (each case is a process)
    os.remove("hog")
    x = []
    while True:
        x.append(b"z" * (64 << 20))
PY
touch hog
echo still here
"""


@scenario("test_rl_rollout_memory_exhausted", "duration-parser")
async def _rollout_memory(tmp: Path) -> Trajectory:
    small = task("duration-parser").model_copy(update={"memory": 256 << 20})
    return await agentenv.rollout(small, cheat_policy(MEMORY_HOG, tmp))


def test_rl_rollout_memory_exhausted(battery: Battery) -> None:
    traj = battery.result("test_rl_rollout_memory_exhausted")
    assert_graded(traj, "rollout")
    assert traj.reward == battery.null_reward("duration-parser"), describe(traj)
    outputs = [r.output for t in traj.turns for r in t.tool_results]
    assert any("still here" in out for out in outputs), describe(traj)  # outlived its hogs


# -- rollout_group -------------------------------------------------------------------------


@scenario("test_rl_group_cheater_gets_no_advantage", "fix-interval-merge")
async def _group_cheat(tmp: Path) -> list[Trajectory]:
    script = "#!/bin/bash\n" + heredoc("intervals.py", MONKEYPATCH_INTERVALS)
    return await agentenv.rollout_group(task("fix-interval-merge"), first_cheats(script, tmp), N)


def test_rl_group_cheater_gets_no_advantage(battery: Battery) -> None:
    group = battery.result("test_rl_group_cheater_gets_no_advantage")
    null_reward = battery.null_reward("fix-interval-merge")
    for traj in group:
        if is_cheater(traj):
            assert traj.advantage is not None and traj.advantage <= 0, (
                f"the cheater's advantage is {traj.advantage}: {describe(traj)}"
            )
    assert_group(group, null_reward, "group with a cheater")


@scenario("test_rl_group_and_stream_parsing_bombs", "log-report-json", "trace-missing-vat")
async def _bombs(tmp: Path) -> tuple[list[Trajectory], list[Trajectory]]:
    """A JSON nesting bomb in the file a json check reads, in a group of 4; an XML bomb
    where the JUnit report goes, in a stream of 4."""
    group = await agentenv.rollout_group(
        task("log-report-json"), first_cheats(JSON_BOMB, tmp / "group"), N
    )
    xml_bomb = "#!/bin/bash\n" + heredoc("ledger/__init__.py", JUNIT_BOMB_MODULE)
    streamed = [
        traj
        async for traj in agentenv.stream(
            [task("trace-missing-vat")], first_cheats(xml_bomb, tmp / "stream"), n=N, concurrency=N
        )
    ]
    return group, streamed


def test_rl_group_and_stream_parsing_bombs(battery: Battery) -> None:
    group, streamed = battery.result("test_rl_group_and_stream_parsing_bombs")
    assert_group(group, battery.null_reward("log-report-json"), "group with a JSON bomb")
    assert_group(streamed, battery.null_reward("trace-missing-vat"), "stream with an XML bomb")


# -- the eval runner -----------------------------------------------------------------------


class ScriptPolicies(Policies):
    """The job's policies, every episode the attack ``script``."""

    def __init__(self, script: str):
        super().__init__("null")
        self.script = script

    def for_task(self, task: Task) -> ChatModel:
        return oracle(self.script, timeout_s=SCRIPT_TIMEOUT_S)


@scenario("test_rl_eval_episode_with_retries_kill_keepalive", "text-stats")
async def _eval_episode(tmp: Path) -> tuple[EpisodeResult, Trajectory | None]:
    return await run_episode_with_retries(
        task("text-stats"),
        0,
        EpisodeSettings(model="null", attempts=2, keep_final=True),
        ScriptPolicies("#!/bin/bash\n" + KILL_KEEPALIVE),
        out=tmp,
    )


def test_rl_eval_episode_with_retries_kill_keepalive(battery: Battery) -> None:
    result, traj = battery.result("test_rl_eval_episode_with_retries_kill_keepalive")
    assert result.outcome == "graded", f"{result.outcome}: {result.error}"
    assert result.attempts == 1, "an agent's doing was retried as an infrastructure failure"
    assert result.reward == battery.null_reward("text-stats"), result.score
    assert traj is not None and traj.reward == result.reward


@scenario("test_rl_run_eval_sabotage", "text-stats", "log-report-json")
async def _run_eval(tmp: Path) -> dict[tuple[str, int], EpisodeResult]:
    tasks = [task("text-stats"), task("log-report-json")]
    settings = EpisodeSettings(model=f"command:{SABOTAGE}", attempts=2)
    await run_eval(tasks, settings, out=tmp / "job", concurrency=2)
    return load_results(tmp / "job")


def test_rl_run_eval_sabotage(battery: Battery) -> None:
    results = battery.result("test_rl_run_eval_sabotage")
    assert sorted(results) == [("log-report-json", 0), ("text-stats", 0)]
    for (task_id, _), r in sorted(results.items()):
        assert r.outcome == "graded", f"{task_id}: {r.outcome}: {r.error}"
        assert r.attempts == 1, f"{task_id}: the agent's doing was retried"
        assert r.reward == battery.null_reward(task_id), f"{task_id}: {r.score}"
