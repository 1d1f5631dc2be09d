"""Eval jobs end to end: results are durable and exactly-once across a SIGKILL, a different
job in the same folder is refused, infrastructure failures are retried, broken verifiers are
errors, kept final states can be regraded; pass@k is the unbiased estimator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from agentenv.model import K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.runner.eval import regrade, run_eval
from agentenv.runner.results import ConfigMismatch, load_results
from agentenv.runner.summary import pass_at_k
from agentenv.sandbox import connect
from agentenv.sandbox.labels import RUN, run_id
from agentenv.tasks import load_task, load_tasks

pytestmark = pytest.mark.anyio


def make_task(root: Path, name: str, verifier: str | None = None) -> Path:
    """A one-file task: write ``greeting.txt`` with ``hello <name>``."""
    folder = root / name
    (folder / "workspace").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "workspace" / "README").write_text("nothing here yet\n")
    (folder / "instruction.md").write_text(f"Write 'hello {name}' to greeting.txt.\n")
    (folder / "solution.sh").write_text(f"echo 'hello {name}' > greeting.txt\n")
    (folder / "tests" / "check.sh").write_text(f'test "$(cat greeting.txt)" = "hello {name}"\n')
    (folder / "task.toml").write_text(
        "description = 'greet'\ntags = ['demo']\n"
        + (verifier or '[verifier]\nkind = "command"\ncommand = "bash /agentenv/tests/check.sh"\n')
    )
    return folder


def solving_script(body: dict[str, Any]) -> ScriptedTurn:
    """A model that solves any greeting task in one turn (requests of concurrent episodes
    interleave, so the answer depends only on the request)."""
    instruction = next(m["content"] for m in body["messages"] if m["role"] == "user")
    name = instruction.split("'hello ")[1].split("'")[0]
    return ScriptedTurn(
        reasoning=f"Write the greeting for {name}.",
        tool_calls=[
            ScriptedToolCall(
                name="write_file",
                arguments=json.dumps({"path": "greeting.txt", "content": f"hello {name}\n"}),
            ),
            ScriptedToolCall(name="submit", arguments="{}"),
        ],
    )


def test_pass_at_k() -> None:
    assert pass_at_k(4, 0, 1) == 0 and pass_at_k(4, 4, 1) == 1
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


async def test_scripted_model_through_the_whole_job(tmp_path: Path) -> None:
    tasks = load_tasks([make_task(tmp_path / "tasks", "ada"), make_task(tmp_path / "tasks", "bob")])
    with K3Server(solving_script) as server:
        rows = await run_eval(tasks, server.base_url, out=tmp_path / "job", samples=2)
        sent = len(server.requests)
        # the same job again: nothing left to run
        again = await run_eval(tasks, server.base_url, out=tmp_path / "job", samples=2)
        assert len(server.requests) == sent == 4
    total = rows[-1]
    assert total.task_id == "total" and total.pass_at_1 == 1.0 and total.errors == 0
    assert total.prompt_tokens > 0 and total.cost_usd == 0  # a self-hosted URL is free
    assert again[-1] == total
    results = load_results(tmp_path / "job")
    assert sorted(results) == [("ada", 0), ("ada", 1), ("bob", 0), ("bob", 1)]
    for r in results.values():
        assert r.outcome == "graded" and r.reward == 1.0 and r.turns == 1
        assert r.trajectory is not None and (tmp_path / "job" / r.trajectory).is_file()
    summary = json.loads((tmp_path / "job" / "summary.json").read_text())
    assert summary[-1]["pass_at_k"] == 1.0 and summary[-1]["k"] == 2

    # a different job in the same folder is refused
    with pytest.raises(ConfigMismatch, match="samples: 2 then, 3 now"):
        await run_eval(tasks, server.base_url, out=tmp_path / "job", samples=3)
    with pytest.raises(ConfigMismatch, match="model: "):
        await run_eval(tasks, "oracle", out=tmp_path / "job", samples=2)


async def test_infrastructure_failures_are_retried_then_recorded(tmp_path: Path) -> None:
    tasks = load_tasks([make_task(tmp_path / "tasks", "cy")])
    engine = connect()
    kills = {"left": 1}

    def killing_script(body: dict[str, Any]) -> ScriptedTurn:
        # the sandbox is paused while the model answers: remove it under the episode
        if kills["left"] > 0:
            kills["left"] -= 1
            for c in engine.api.containers(
                filters={"label": f"{RUN}={run_id()}", "status": "paused"}
            ):
                engine.api.remove_container(c["Id"], force=True)
        return solving_script(body)

    with K3Server(killing_script) as server:
        rows = await run_eval(tasks, server.base_url, out=tmp_path / "retried", attempts=2)
    (result,) = load_results(tmp_path / "retried").values()
    assert result.outcome == "graded" and result.attempts == 2 and result.reward == 1.0
    assert rows[-1].errors == 0

    kills["left"] = 5
    with K3Server(killing_script) as server:
        rows = await run_eval(tasks, server.base_url, out=tmp_path / "lost", attempts=2)
    (result,) = load_results(tmp_path / "lost").values()
    assert result.outcome == "sandbox_lost" and result.attempts == 2 and result.reward is None
    assert "SandboxUnavailable" in (result.error or "")
    assert rows[-1].errors == 1 and rows[-1].pass_at_1 is None  # not graded, not a failure


async def test_a_broken_verifier_is_an_error_and_final_states_can_be_regraded(
    tmp_path: Path,
) -> None:
    broken = make_task(
        tmp_path / "tasks", "dee", '[verifier]\nkind = "command"\ncommand = "no-such-checker"\n'
    )
    good = make_task(tmp_path / "tasks", "eve")
    job = tmp_path / "job"
    rows = await run_eval(load_tasks([broken, good]), "oracle", out=job, keep_final=True)
    results = load_results(job)
    assert results[("dee", 0)].outcome == "verifier_error" and results[("dee", 0)].reward is None
    assert results[("eve", 0)].outcome == "graded" and results[("eve", 0)].passed
    assert rows[0].task_id == "dee" and rows[0].errors == 1 and rows[0].pass_at_1 is None

    # the kept final states are the workdirs the verifier got, in the job folder
    for r in results.values():
        assert r.final_state is not None
        with tarfile.open(job / r.final_state) as kept:
            assert "greeting.txt" in kept.getnames()

    # fix the verifier; regrading re-verifies the kept states without running any agent
    (broken / "task.toml").write_text(
        '[verifier]\nkind = "command"\ncommand = "bash /agentenv/tests/check.sh"\n'
    )
    (good / "tests" / "check.sh").write_text("test \"$(cat greeting.txt)\" = 'hello nobody'\n")
    rows = await regrade(job)
    results = load_results(job)
    assert results[("dee", 0)].outcome == "graded" and results[("dee", 0)].passed
    assert results[("eve", 0)].outcome == "graded" and not results[("eve", 0)].passed
    assert len((job / "results.jsonl").read_text().splitlines()) == 2
    assert load_task(broken).id == "dee"

    # a kept state that is gone spoils only its own result
    gone = results[("dee", 0)].final_state
    assert gone is not None
    (job / gone).unlink()
    await regrade(job)
    results = load_results(job)
    assert results[("dee", 0)].outcome == "verifier_error"
    assert "No such file" in str(results[("dee", 0)].error)
    assert results[("eve", 0)].outcome == "graded"


def test_sigkill_mid_run_then_resume_gives_every_episode_exactly_once(tmp_path: Path) -> None:
    tasks = [make_task(tmp_path / "tasks", n) for n in ("fay", "gus", "hal")]
    job = tmp_path / "job"
    env = {**os.environ, "COLUMNS": "150"}
    with K3Server(solving_script, ttft_s=0.4) as server:
        argv = [sys.executable, "-m", "agentenv", "eval", str(tmp_path / "tasks"),
                "--model", server.base_url, "--samples", "4", "--concurrency", "2",
                "--out", str(job)]  # fmt: skip
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            path = job / "results.jsonl"
            if path.exists() and len(path.read_bytes().splitlines()) >= 3:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = load_results(job)
        assert 3 <= len(before) < 12
        # as if the kill had cut a line being written
        with open(job / "results.jsonl", "ab") as f:
            f.write(b'{"task_id": "fay", "sample": 3, "outco')
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    lines = (job / "results.jsonl").read_text().splitlines()
    keys = [(json.loads(line)["task_id"], json.loads(line)["sample"]) for line in lines]
    assert len(keys) == 12 and len(set(keys)) == 12  # none lost, none twice
    for key, result in before.items():
        assert load_results(job)[key] == result  # finished episodes were kept, not re-run
    assert "total" in done.stdout and "100%" in done.stdout
    assert len(list((job / "trajectories").rglob("*.json"))) == 12
    assert len(tasks) == 3


async def test_a_root_task_can_verify_in_its_final_state_and_leaves_no_image(
    tmp_path: Path,
) -> None:
    # the outcome is system state outside the workdir: only `verify_in = "final"` sees it
    folder = make_task(
        tmp_path / "tasks",
        "ida",
        "[verifier]\nkind = 'command'\n"
        "command = 'test -f /opt/installed && test -f greeting.txt'\n",
    )
    (folder / "solution.sh").write_text(
        "echo 'hello ida' > greeting.txt && touch /opt/installed\n"
        "nohup sh -c 'sleep 600' >/dev/null 2>&1 &\n"
    )
    toml = folder / "task.toml"
    body = toml.read_text()
    engine = connect()
    images_before = {i["Id"] for i in engine.api.images(filters={"label": f"{RUN}={run_id()}"})}
    toml.write_text('user = "root"\n' + body)
    rows = await run_eval(load_tasks([folder]), "oracle", out=tmp_path / "prepared")
    assert rows[-1].pass_at_1 == 0.0  # the prepared state has no /opt/installed
    toml.write_text('user = "root"\nverify_in = "final"\n' + body)
    rows = await run_eval(load_tasks([folder]), "oracle", out=tmp_path / "final")
    assert rows[-1].pass_at_1 == 1.0
    images_after = {i["Id"] for i in engine.api.images(filters={"label": f"{RUN}={run_id()}"})}
    assert images_after == images_before  # the image of the final state is gone
