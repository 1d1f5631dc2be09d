"""Eval jobs end to end: results are durable and exactly-once across a SIGKILL, a different
job in the same folder is refused, infrastructure failures are retried, broken verifiers are
errors, kept final states can be regraded; pass@k is the unbiased estimator."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentenv.agent.trajectory import Trajectory
from agentenv.eval.jobs import (
    MAX_RERUNS,
    EpisodeSettings,
    job_id,
    regrade,
    run_eval,
    settled,
)
from agentenv.eval.summary import pass_at_k, summarize
from agentenv.runner.results import ConfigMismatch, EpisodeResult, load_results
from agentenv.sandbox.docker import connect
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.labels import JOB, OWNER, RUN, job_scope, labels_for, run_id
from agentenv.tasks import load_task, load_tasks
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.helpers import frozen

pytestmark = pytest.mark.anyio


def make_task(
    root: Path, name: str, verifier: str | None = None, tags: tuple[str, ...] = ("demo",)
) -> Path:
    """A one-file task: write ``greeting.txt`` with ``hello <name>``."""
    folder = root / name
    (folder / "workspace").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "workspace" / "README").write_text("nothing here yet\n")
    (folder / "instruction.md").write_text(f"Write 'hello {name}' to greeting.txt.\n")
    (folder / "solution.sh").write_text(f"echo 'hello {name}' > greeting.txt\n")
    (folder / "tests" / "check.sh").write_text(f'test "$(cat greeting.txt)" = "hello {name}"\n')
    (folder / "task.toml").write_text(
        f"description = 'greet'\ntags = {list(tags)!r}\n"
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


def test_a_resume_runs_infrastructure_errors_again_but_not_for_ever(tmp_path: Path) -> None:
    def line(task: str, outcome: str) -> EpisodeResult:
        return EpisodeResult(task_id=task, sample=0, outcome=outcome)  # type: ignore[arg-type]

    journal = [line("lost-thrice", "sandbox_lost")] * MAX_RERUNS + [
        line("lost-once", "sandbox_lost"), line("down-then-graded", "endpoint_down"),
        line("down-then-graded", "graded"), line("broken", "verifier_error"),
    ]  # fmt: skip
    (tmp_path / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in journal))
    kept = settled(tmp_path)
    assert sorted(task for task, _ in kept) == ["broken", "down-then-graded", "lost-thrice"]
    assert kept[("down-then-graded", 0)].outcome == "graded"
    # --retry-errors: every error runs again, past MAX_RERUNS and not retried ones alike
    again = settled(tmp_path, retry_errors=True)
    assert sorted(task for task, _ in again) == ["down-then-graded"]


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
        # the whole episode, split by phase: sandboxes and verification are in it
        for phase in ("prepare", "create", "model", "tools", "finish", "verify", "teardown"):
            assert r.phases[phase] > 0, phase
        assert sum(r.phases.values()) == pytest.approx(r.wall_s, rel=1e-6)
        assert r.started_at is not None and r.finished_at is not None
        assert r.finished_at - r.started_at >= r.wall_s
        traj = json.loads((tmp_path / "job" / str(r.trajectory)).read_text())
        assert r.wall_s > traj["wall_s"] + r.phases["verify"]  # the loop alone, before
    summary = json.loads((tmp_path / "job" / "summary.json").read_text())
    assert summary[-1]["pass_at_k"] == 1.0 and summary[-1]["k"] == 2
    assert summary[-1]["usd_per_solved"] == 0.0 and summary[-1]["stopped"] is None
    # episodes ran 4 at a time: the job took less than their sum
    assert 0 < summary[-1]["job_wall_s"] < summary[-1]["wall_s"]
    assert summary[-1]["episodes_per_s"] == pytest.approx(4 / summary[-1]["job_wall_s"])
    assert summary[-1]["phases"]["verify"] == pytest.approx(
        sum(r.phases["verify"] for r in results.values())
    )

    # a different job in the same folder is refused, saying compactly what differs
    with pytest.raises(ConfigMismatch, match="samples: 2 then, 3 now"):
        await run_eval(tasks, server.base_url, out=tmp_path / "job", samples=3)
    with pytest.raises(ConfigMismatch, match="model: "):
        await run_eval(tasks, "oracle", out=tmp_path / "job", samples=2)
    more = [make_task(tmp_path / "more", f"t{i}") for i in range(9)]
    with pytest.raises(
        ConfigMismatch, match=r"job \(tasks: 9 added \(t0, t1, t2, t3, t4, … 4 more\)\);"
    ):
        await run_eval(
            [*tasks, *load_tasks(more)], server.base_url, out=tmp_path / "job", samples=2
        )
    (tmp_path / "tasks" / "bob" / "instruction.md").write_text("Write 'hello bob' now.\n")
    with pytest.raises(ConfigMismatch, match=r"tasks: 1 removed \(ada\); 1 changed \(bob\)"):
        await run_eval(
            load_tasks([tmp_path / "tasks" / "bob"]),
            server.base_url,
            out=tmp_path / "job",
            samples=2,
        )


async def test_infrastructure_failures_are_retried_then_recorded(tmp_path: Path) -> None:
    tasks = load_tasks([make_task(tmp_path / "tasks", "cy")])
    engine = connect()
    kills = {"left": 1}

    def killing_script(body: dict[str, Any]) -> ScriptedTurn:
        # the sandbox is paused while the model answers: remove it under the episode
        if kills["left"] > 0:
            kills["left"] -= 1
            for c in engine.api.containers(filters={"label": f"{RUN}={run_id()}"}):
                if frozen(c["Id"]):
                    engine.api.remove_container(c["Id"], force=True)
        return solving_script(body)

    def traj_of(job: Path, result: EpisodeResult) -> Trajectory:
        assert result.trajectory is not None
        return Trajectory.model_validate_json((job / result.trajectory).read_text())

    price = "#input=1&cached_input=0.5&output=2"
    with K3Server(killing_script) as server:
        settings = EpisodeSettings(model=server.base_url + price, attempts=2)
        rows = await run_eval(tasks, settings, out=tmp_path / "retried")
    (result,) = load_results(tmp_path / "retried").values()
    assert result.outcome == "graded" and result.attempts == 2 and result.reward == 1.0
    assert rows[-1].errors == 0
    # the lost attempt's turn was paid for: the episode's spend has it, its trajectory not
    kept = traj_of(tmp_path / "retried", result)
    assert 0 < kept.cost_usd < result.cost_usd and kept.prompt_tokens < result.prompt_tokens
    assert result.phases["retries"] > 0  # the lost attempt's time is in the episode's
    assert sum(result.phases.values()) == pytest.approx(result.wall_s, rel=1e-6)

    kills["left"] = 5
    with K3Server(killing_script) as server:
        settings = EpisodeSettings(model=server.base_url + price, attempts=2)
        rows = await run_eval(tasks, settings, out=tmp_path / "lost")
    (result,) = load_results(tmp_path / "lost").values()
    assert result.outcome == "sandbox_lost" and result.attempts == 2 and result.reward is None
    lost_usd = result.cost_usd
    assert lost_usd > 0 and rows[-1].cost_usd == lost_usd  # two paid turns, no trajectory
    # an error still says where its time went, up to the failure
    assert result.phases["retries"] > 0 and result.phases["loop"] > 0
    assert "SandboxUnavailable" in (result.error or "")
    assert rows[-1].errors == 1 and rows[-1].pass_at_1 is None  # not graded, not a failure

    # a resume runs the infrastructure error again; its line stays, the new one counts
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])  # the same model URL
    with K3Server(solving_script, port=port) as server:
        settings = EpisodeSettings(model=server.base_url + price, attempts=2)
        rows = await run_eval(tasks, settings, out=tmp_path / "lost")
    journal = (tmp_path / "lost" / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["outcome"] for line in journal] == ["sandbox_lost", "graded"]
    (result,) = load_results(tmp_path / "lost").values()
    assert result.outcome == "graded" and rows[-1].errors == 0 and rows[-1].pass_at_1 == 1.0
    # the new line carries what the lost run spent: the job's cost is every dollar paid
    last = traj_of(tmp_path / "lost", result)
    assert result.cost_usd == pytest.approx(lost_usd + last.cost_usd)
    assert rows[-1].cost_usd == pytest.approx(result.cost_usd)


async def test_a_broken_verifier_is_an_error_and_final_states_can_be_regraded(
    tmp_path: Path,
) -> None:
    broken = make_task(
        tmp_path / "tasks", "dee", '[verifier]\nkind = "command"\ncommand = "no-such-checker"\n'
    )
    good = make_task(tmp_path / "tasks", "eve")
    job = tmp_path / "job"
    settings = EpisodeSettings(model="oracle", keep_final=True)
    rows = await run_eval(load_tasks([broken, good]), settings, out=job)
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
    """A SIGKILLed run leaves its log lines and its containers; the resumed run removes
    those containers before it starts (and nothing of a live run, or of another job), and
    runs each missing episode once."""
    tasks = [make_task(tmp_path / "tasks", n) for n in ("fay", "gus", "hal")]
    job = tmp_path / "job"
    env = {**os.environ, "COLUMNS": "150"}
    engine = connect()
    mine = {"label": f"{JOB}={job_id(job)}"}
    held, release = threading.Semaphore(0), threading.Event()

    def holding_script(body: dict[str, Any]) -> ScriptedTurn:
        # after three answers, hold every request: its episode's sandboxes stay (paused)
        if len(server.requests) > 3 and not release.is_set():
            held.release()
            release.wait(60)
        return solving_script(body)

    with K3Server(holding_script, ttft_s=0.2) as server:
        argv = [sys.executable, "-m", "agentenv", "eval", str(tmp_path / "tasks"),
                "--model", server.base_url, "--samples", "4", "--concurrency", "2",
                "--out", str(job)]  # fmt: skip
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert held.acquire(timeout=60)  # mid-episode
        deadline = time.monotonic() + 30
        while len(load_results(job)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        release.set()
        assert proc.stderr is not None
        log = proc.stderr.read().decode()
        # without a terminal, progress went out as plain lines as episodes finished
        assert re.search(r"^eval [1-9]\d*/12 done \(\d+%\) · \d+ passed", log, re.M), log
        left = {c["Id"] for c in engine.api.containers(all=True, filters=mine)}
        assert left  # a SIGKILL cleans nothing up
        archives = list(Path(tempfile.gettempdir()).glob(f"agentenv-archive-{proc.pid}-*"))
        assert archives  # the episodes' workspaces, on the host
        before = load_results(job)
        assert 3 <= len(before) < 12
        # as if the kill had cut a line being written
        with open(job / "results.jsonl", "ab") as f:
            f.write(b'{"task_id": "fay", "sample": 3, "outco')
        # a live runner of this job (this process), and a dead runner of another job
        with job_scope(job_id(job)):
            live = engine.api.create_container(
                BASE_IMAGE, ["true"], labels=labels_for("sandbox", 600)
            )
        dead = {
            **labels_for("sandbox", 600),
            JOB: "another-job",
            OWNER: f"{socket.gethostname()}:999999999:1",
        }
        other = engine.api.create_container(BASE_IMAGE, ["true"], labels=dead)
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr
            now = {c["Id"] for c in engine.api.containers(all=True)}
            assert not left & now  # the killed run's leftovers are gone
            assert not [a for a in archives if a.exists()]
            assert {live["Id"], other["Id"]} <= now  # a live runner's, another job's: kept
        finally:
            for c in (live, other):
                engine.api.remove_container(c["Id"], force=True)
    # (a removal the killed runner had asked for may still have completed in the engine)
    assert re.search(r"^removed [1-9]\d* containers/images left by a killed run", done.stderr, re.M)
    assert done.stderr.index("resuming") < done.stderr.index("eval ")
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


async def test_a_budget_spent_on_a_resume_still_sums_every_dollar_in_the_summary(
    tmp_path: Path,
) -> None:
    # what earlier runs paid is in the budget and in the summary alike, the lost episode
    # the budget keeps from running again included
    tasks = load_tasks([make_task(tmp_path / "tasks", n) for n in ("ann", "bo")])
    job = tmp_path / "job"
    await run_eval(tasks, "oracle", out=job)
    first = [json.loads(line) for line in (job / "results.jsonl").read_text().splitlines()]
    paid = {"ann": ("graded", 6.0), "bo": ("sandbox_lost", 4.5)}
    for line in first:
        line["outcome"], line["cost_usd"] = paid[line["task_id"]]
        if line["outcome"] != "graded":
            line.update(passed=False, reward=None, score=None)
    (job / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in first))
    rows = await run_eval(tasks, "oracle", out=job, max_cost_usd=10.0)
    assert rows[-1].stopped == "max_cost"  # $10.5 spent: bo is not run again
    assert rows[-1].cost_usd == 10.5 and rows[-1].errors == 1 and rows[-1].episodes == 2


async def test_max_cost_stops_starting_episodes_and_a_higher_cap_completes_the_job(
    tmp_path: Path,
) -> None:
    tasks = load_tasks([make_task(tmp_path / "tasks", n) for n in ("jo", "kim", "lee", "max")])
    job = tmp_path / "job"
    with K3Server(solving_script) as server:
        priced = f"{server.base_url}#input=1&cached_input=0.5&output=2"
        # two episodes start at once, before anything is spent; both finish, none follows
        rows = await run_eval(tasks, priced, out=job, concurrency=2, max_cost_usd=1e-9)
        assert len(server.requests) == 2
        first = load_results(job)
        assert len(first) == 2 and all(r.passed for r in first.values())
        total = rows[-1]
        assert total.stopped == "max_cost" and total.episodes == 2
        assert total.cost_usd > 1e-9  # the running ones finished past the cap
        assert total.usd_per_solved == pytest.approx(total.cost_usd / 2)
        summary = json.loads((job / "summary.json").read_text())
        assert summary[-1]["stopped"] == "max_cost"

        # the same cap again: spent already, nothing starts
        rows = await run_eval(tasks, priced, out=job, concurrency=2, max_cost_usd=1e-9)
        assert len(server.requests) == 2 and rows[-1].stopped == "max_cost"

        # a higher cap is not a different job: it runs only what is left
        rows = await run_eval(tasks, priced, out=job, concurrency=2, max_cost_usd=100.0)
        assert len(server.requests) == 4
    results = load_results(job)
    assert len(results) == 4 and all(r.passed for r in results.values())
    assert all(results[key] == r for key, r in first.items())  # not run again
    assert rows[-1].stopped is None and rows[-1].pass_at_1 == 1.0
    assert rows[-1].cost_usd == pytest.approx(sum(r.cost_usd for r in results.values()))
    assert all(r.cost_usd > 0 for r in results.values())
    # two of the three runs ran episodes: the job's wall time is theirs, not the gap between
    runs: dict[str | None, list[EpisodeResult]] = {}
    for r in results.values():
        runs.setdefault(r.run, []).append(r)
    assert len(runs) == 2
    spans = [
        max(r.finished_at or 0 for r in rs) - min(r.started_at or 0 for r in rs)
        for rs in runs.values()
    ]
    assert rows[-1].job_wall_s == pytest.approx(sum(spans))


def test_summary_orders_tasks_naturally_with_subtotals_per_tag() -> None:
    def result(task: str, passed: bool, cost: float, run: str, at: float) -> EpisodeResult:
        return EpisodeResult(
            task_id=task,
            sample=0,
            outcome="graded",
            reward=float(passed),
            passed=passed,
            cost_usd=cost,
            wall_s=2.0,
            phases={"model": 1.5, "verify": 0.5},
            run=run,
            started_at=at,
            finished_at=at + 2.0,
        )

    results = [
        result("task-10", True, 0.5, "a", 100.0),
        result("task-2", False, 0.25, "a", 101.0),
        result("task-1", True, 0.25, "b", 500.0),
        EpisodeResult(task_id="other", sample=0, outcome="sandbox_lost", cost_usd=1.0),
    ]
    tags = {"task-10": ["hard"], "task-2": ["easy"], "task-1": ["easy"], "other": ["easy"]}
    rows = summarize(results, 1, tags)
    assert [r.task_id for r in rows] == [
        "other", "task-1", "task-2", "task-10", "tag:easy", "tag:hard", "total"
    ]  # fmt: skip
    easy = rows[4]
    assert easy.kind == "tag" and easy.episodes == 3 and easy.passed == 1 and easy.errors == 1
    assert easy.pass_at_1 == pytest.approx(0.5)  # the mean over its graded tasks
    assert easy.usd_per_solved == pytest.approx(1.5)  # every dollar, over what passed
    total = rows[-1]
    assert total.kind == "total" and total.usd_per_solved == pytest.approx(1.0)
    assert total.phases == {"model": 4.5, "verify": 1.5}
    # run a: 100 → 103; run b: 500 → 502; the gap between runs is not the job's time
    assert total.job_wall_s == pytest.approx(5.0)
    assert total.episodes_per_s == pytest.approx(3 / 5.0)
    assert summarize(results[:1], 1, {})[-1].usd_per_solved == 0.5
    assert summarize(results[1:2], 1, {})[-1].usd_per_solved is None  # nothing solved
    # a tag every task carries would only repeat the total
    assert [r.kind for r in summarize(results[:2], 1, {"task-10": ["x"], "task-2": ["x"]})] == [
        "task",
        "task",
        "total",
    ]
