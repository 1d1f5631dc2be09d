"""The RL API against real sandboxes and the local K3 server: rollouts with rewards, forked
groups (isolated, with advantages), streaming, partial rollouts suspended across a process
boundary with per-turn policy versions, and the token export's loss mask."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentenv.agent import policies
from agentenv.agent.export import NoTokens
from agentenv.model import OpenAIChatModel
from agentenv.rl.rollout import (
    GroupTimings,
    SuspendedRollout,
    rollout,
    rollout_group,
    start,
    stream,
)
from agentenv.sandbox import get_backend
from agentenv.tasks import Task, load_task
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.view import build_site

pytestmark = pytest.mark.anyio


def make_task(root: Path, name: str = "note", setup: str | None = None) -> Task:
    folder = root / name
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "README").write_text("write ok into answer.txt\n")
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "solution.sh").write_text("echo ok > answer.txt\n")
    (folder / "task.toml").write_text(
        (f"setup = {json.dumps(setup)}\n" if setup else "")
        + '[verifier]\nkind = "file"\npath = "answer.txt"\nequals = "ok"\n'
    )
    return load_task(folder)


def call(name: str, **args: Any) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=json.dumps(args))


def two_turns(answer: str, marker: str = "") -> list[ScriptedTurn]:
    return [
        ScriptedTurn(
            reasoning="Look, then write.",
            tool_calls=[call("bash", command=f"ls -A; touch mine-{marker or answer}")],
        ),
        ScriptedTurn(
            reasoning="Write it.",
            tool_calls=[
                call("write_file", path="answer.txt", content=answer + "\n"),
                call("submit"),
            ],
        ),
    ]


def by_history(answers: dict[str, str]) -> Any:
    """A script for concurrent episodes: the turn follows from the request alone."""

    def script(body: dict[str, Any]) -> ScriptedTurn:
        turns = sum(m["role"] == "assistant" for m in body["messages"])
        tag = next(m["content"] for m in body["messages"] if m["role"] == "user").split("#")[-1]
        return two_turns(answers.get(tag.strip(), "ok"), tag.strip())[min(turns, 1)]

    return script


async def test_rollout_fills_in_the_reward(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    solved = await rollout(task, lambda t: policies.oracle((t.folder / "solution.sh").read_text()))  # type: ignore[operator]
    assert solved.reward == 1.0 and solved.score is not None and solved.score.passed
    idle = await rollout(task, lambda t: policies.null())
    assert idle.reward == 0.0


async def test_group_forks_from_one_setup_are_isolated_and_get_advantages(tmp_path: Path) -> None:
    task = make_task(tmp_path, setup="echo prepared > .setup-done")
    tasks = [task.model_copy(update={"instruction": f"{task.instruction} #{i}"}) for i in range(4)]
    answers = {"0": "ok", "1": "no", "2": "ok", "3": "no"}
    with K3Server(by_history(answers)) as server:
        model = OpenAIChatModel(base_url=server.base_url, api_key="k")
        timings: list[GroupTimings] = []
        group = []
        for t in tasks[:1]:
            group = await rollout_group(t, model, 4, timings=timings)
        await model.aclose()
    assert len(group) == 4 and len({t.group_id for t in group}) == 1
    for traj in group:
        listing = traj.turns[0].tool_results[0].output
        assert ".setup-done" in listing  # the setup ran once, before the fork
        assert "mine-" not in listing  # no fork sees another's files
    assert timings[0].shared_setup


async def test_group_advantages_from_mixed_rewards(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    outcomes = iter(["ok", "no", "ok", "ok"])

    def policy(t: Task) -> Any:
        answer = next(outcomes)
        return policies.ScriptedModel(
            [policies.command(f"echo {answer} > answer.txt").completions[0]], "fixed"
        )

    group = await rollout_group(task, policy, 4, share_setup=False)
    rewards = sorted(t.reward or 0.0 for t in group)
    assert rewards == [0.0, 1.0, 1.0, 1.0]
    assert sum(t.advantage_centered or 0.0 for t in group) == pytest.approx(0.0)
    best = max(group, key=lambda t: t.reward or 0.0)
    assert best.advantage == pytest.approx(0.25 / (0.75 * 0.25) ** 0.5, rel=1e-4)
    # a pipeline's folder of these trajectories, read by `agentenv view`: the group and each
    # rollout's advantage in the table and on its page
    folder = tmp_path / "rollouts"
    for i, traj in enumerate(group):
        (folder / traj.task_id).mkdir(parents=True, exist_ok=True)
        (folder / traj.task_id / f"{i}.json").write_text(traj.model_dump_json())
    (folder / "broken.json").write_text("{not json")
    index = build_site(folder)
    table = index.read_text()
    assert "<th data-col='11'>group</th><th data-col='12'>advantage</th>" in table
    assert table.count(f"data-sort='{group[0].group_id}'") == 4
    assert f"{best.advantage:+.3f}" in table
    assert table.count("data-status='error'") == 1  # the broken file: a row saying so
    pages = sorted((index.parent / "episodes").glob("*.html"))
    assert len(pages) == 5
    assert any("could not be read" in p.read_text() for p in pages)


async def test_stream_yields_every_rollout_as_it_finishes(tmp_path: Path) -> None:
    tasks = [make_task(tmp_path, f"t{i}") for i in range(3)]
    seen = []
    async for traj in stream(
        tasks, lambda t: policies.oracle("echo ok > answer.txt"), n=2, concurrency=2
    ):
        seen.append((traj.task_id, traj.reward))
    assert sorted(seen) == sorted([(f"t{i}", 1.0) for i in range(3)] * 2)


RESUME = """
import json, sys, anyio
from agentenv.model import OpenAIChatModel
from agentenv.rl.rollout import SuspendedRollout, resume

async def main():
    state = SuspendedRollout.model_validate_json(open(sys.argv[1]).read())
    model = OpenAIChatModel.for_endpoint(__import__("agentenv").model.resolve_endpoint(sys.argv[2]))
    handle = await resume(state, model, version=2)
    before = handle.box.id
    traj = await handle.run()
    await model.aclose()
    print(json.dumps({"box": before, "traj": traj.model_dump(mode="json")}))

anyio.run(main)
"""


async def test_partial_rollout_suspended_and_resumed_in_another_process(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    with K3Server(two_turns("ok")) as server:
        model = OpenAIChatModel.for_endpoint(
            __import__("agentenv").model.resolve_endpoint(server.base_url)
        )
        handle = await start(task, model, version=1)
        box_id = handle.box.id
        assert not await handle.step()
        await handle.box.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
        state = await handle.suspend()
        await model.aclose()
        # suspended: the busy loop uses no CPU while the weights would be updated
        # asked of the backend the rollout ran on (this suite runs on Docker and Podman)
        status = {r.id: r.status for r in get_backend().leftovers()}
        assert status[box_id] == "paused", status.get(box_id)
        from agentenv.sandbox import cgroup

        cpu_before = cgroup.cpu_usage_ns(box_id)
        await anyio.sleep(0.5)
        assert cgroup.cpu_usage_ns(box_id) == cpu_before
        (tmp_path / "state.json").write_text(state.model_dump_json())
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(RESUME),
                str(tmp_path / "state.json"),
                server.base_url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    traj = result["traj"]
    assert result["box"] == box_id  # the same sandbox, resumed
    assert [t["policy_version"] for t in traj["turns"]] == [1, 2]
    assert traj["stop_reason"] == "submitted" and traj["score"]["reward"] == 1.0
    # the history continued: the second request carried the first turn's messages
    assert len(server.requests) == 2
    assert (
        server.requests[1]["messages"][: len(server.requests[0]["messages"])]
        == (server.requests[0]["messages"])
    )
    assert SuspendedRollout.model_validate_json((tmp_path / "state.json").read_text())
    assert box_id not in {r.id for r in get_backend().leftovers()}  # removed after finishing


async def test_token_export_masks_only_sampled_tokens(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    with K3Server(two_turns("ok")) as server:
        model = OpenAIChatModel.for_endpoint(
            __import__("agentenv").model.resolve_endpoint(server.base_url)
        )
        traj = await rollout(task, model, policy_version=7)
        await model.aclose()
    seq = traj.to_concat()
    sampled = [i for t in traj.turns for i in (t.completion.token_ids or [])]
    assert sum(seq.loss_mask) == len(sampled) > 0
    assert [tok for tok, m in zip(seq.token_ids, seq.loss_mask, strict=True) if m] == sampled
    assert len(seq.token_ids) == len(seq.loss_mask) == len(seq.logprobs) == len(seq.policy_versions)
    assert all(v == 7 for v, m in zip(seq.policy_versions, seq.loss_mask, strict=True) if m)
    assert all(lp == 0.0 for lp, m in zip(seq.logprobs, seq.loss_mask, strict=True) if not m)
    # the last prompt is the sequence up to the last turn's sample
    last = traj.turns[-1].completion
    assert seq.token_ids[: len(last.prompt_token_ids or [])] == last.prompt_token_ids
    assert seq.reward == 1.0
    assert traj.to_messages()[0]["role"] == "system"

    oracle = await rollout(task, lambda t: policies.oracle("echo ok > answer.txt"))
    with pytest.raises(NoTokens, match="no token ids"):
        oracle.to_concat()


async def test_rollout_from_a_warm_pool(tmp_path: Path) -> None:
    from agentenv.sandbox import SandboxPool, SandboxSpec

    task = make_task(tmp_path)
    async with SandboxPool(SandboxSpec(), size=2) as pool:
        trajs = [
            await rollout(task, lambda t: policies.oracle("echo ok > answer.txt"), pool=pool)
            for _ in range(3)
        ]
    assert [t.reward for t in trajs] == [1.0, 1.0, 1.0]


async def test_stopping_a_stream_early_removes_what_was_running(tmp_path: Path) -> None:
    import contextlib

    from agentenv.sandbox.labels import run_id

    def ours() -> int:
        return sum(r.kind == "sandbox" and r.run == run_id() for r in get_backend().leftovers())

    before = ours()
    tasks = [make_task(tmp_path, f"s{i}") for i in range(3)]
    policy = lambda t: policies.oracle("echo ok > answer.txt")  # noqa: E731
    async with contextlib.aclosing(stream(tasks, policy, n=2, concurrency=2)) as trajs:
        async for traj in trajs:
            assert traj.reward == 1.0
            break
    assert ours() == before
