"""A real eval job to break: greeting tasks that take three model turns each (a command, a
file, a submit) against the local K3 server with a realistic time to first token, run by
`agentenv eval` in its own process on the private engine; and what every scenario asserts
after the fault: each episode has exactly one result that counts (graded; an infrastructure
error only where a resume will retry it), none ran twice to a grade, nothing earlier in the
journal was rewritten, nothing of ours is left after gc, and the exit code says what
happened."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentenv.runner.outcomes import TREATMENT
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from tests.eval.test_eval import make_task
from tests.faults.engine import PrivateEngine

TTFT_S = 1.0  # a model that thinks: the sandboxes spend most of an episode paused


class Row(BaseModel):
    """One line of the reliability table."""

    scenario: str
    episodes: int
    affected: int  # episodes that saw the fault (a retry of any kind, or a line said error)
    retried: int  # episode attempts run again (in the run, or by the resume), plus model
    # requests retried by the client
    lost: int  # episodes without a result that counts
    duplicated: int  # episodes graded more than once (the model paid twice)
    leaked: int  # containers and images of ours left after gc
    exit: str  # the exit codes, first run -> resume


ROWS: list[Row] = []


def three_turns(body: dict[str, Any]) -> ScriptedTurn:
    """A model that solves a greeting task in three turns: looks, writes, submits. Answers
    depend only on the request (episodes interleave)."""
    instruction = next(m["content"] for m in body["messages"] if m["role"] == "user")
    name = instruction.split("'hello ")[1].split("'")[0]
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if done == 0:
        call = ScriptedToolCall(name="bash", arguments=json.dumps({"command": "sleep 0.3; ls"}))
    elif done == 1:
        content = json.dumps({"path": "greeting.txt", "content": f"hello {name}\n"})
        call = ScriptedToolCall(name="write_file", arguments=content)
    else:
        call = ScriptedToolCall(name="submit", arguments="{}")
    return ScriptedTurn(reasoning=f"Step {done} for {name}.", tool_calls=[call])


# a verification long enough to be caught in the middle of
SLOW_CHECK = '[verifier]\nkind = "command"\ncommand = "sleep 3; bash /agentenv/tests/check.sh"\n'


def make_tasks(root: Path, n: int, verifier: str | None = None) -> Path:
    """``n`` greeting tasks in ``root`` (``verifier``: their task.toml's [verifier])."""
    for i in range(n):
        make_task(root, f"greet-{i}", verifier=verifier)
    return root


def verifying(server: K3Server, n: int = 2, after_s: float = TTFT_S + 1.0) -> None:
    """Wait until ``n`` episodes are verifying: their last model turn (the submit) was
    asked for, answered after the time to first token, and the slow check has begun."""
    wait_until(
        lambda: sum(
            1 for body in list(server.requests)
            if sum(m["role"] == "assistant" for m in body["messages"]) == 2
        ) >= n,
        what=f"{n} episodes at their last turn",
    )  # fmt: skip
    time.sleep(after_s)


class Job:
    """`agentenv eval` over ``tasks`` into ``out``, on ``engine``, as its own process."""

    def __init__(
        self,
        engine: PrivateEngine,
        server: K3Server,
        tasks: Path,
        out: Path,
        *,
        samples: int = 2,
        concurrency: int = 4,
        extra: tuple[str, ...] = (),
    ):
        self.engine, self.tasks, self.out = engine, tasks, out
        self.argv = [
            sys.executable, "-m", "agentenv", "eval", str(tasks), "--model", server.base_url,
            "--samples", str(samples), "--concurrency", str(concurrency), "--out", str(out),
            *extra,
        ]  # fmt: skip
        self.process: subprocess.Popen[str] | None = None
        self.exits: list[int] = []
        self.outputs: list[tuple[str, str]] = []

    def start(self) -> None:
        """Run it in the background."""
        env = {**self.engine.env, "COLUMNS": "200"}
        self.process = subprocess.Popen(
            self.argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def wait(self, timeout: float = 300) -> int:
        """Wait for it; its exit code (its output kept in :attr:`outputs`)."""
        assert self.process is not None
        stdout, stderr = self.process.communicate(timeout=timeout)
        self.exits.append(self.process.returncode)
        self.outputs.append((stdout, stderr))
        return self.process.returncode

    def run(self, timeout: float = 300) -> int:
        """Run it to the end (a resume, when the folder has results)."""
        self.start()
        return self.wait(timeout)

    def lines(self) -> list[dict[str, Any]]:
        """The journal's lines, as written (every line, not the last per episode)."""
        path = self.out / "results.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def journal(self) -> bytes:
        """The journal's bytes (to check that nothing earlier is ever rewritten)."""
        path = self.out / "results.jsonl"
        return path.read_bytes() if path.exists() else b""

    def log_events(self, event: str) -> list[dict[str, Any]]:
        """The job log's events named ``event`` (all runs)."""
        path = self.out / "log.jsonl"
        if not path.exists():
            return []
        found = []
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == event:
                found.append(record)
        return found


def retried_errors(job: Job) -> list[str]:
    """What was retried in ``job``, for an assertion message: each failed episode attempt
    (log.jsonl's ``episode.failed``: task, sample, attempt, outcome, error), each model
    request the client retried (``model.retry``), and each line a resume ran again."""
    said = [
        f"{e.get('task')}/{e.get('sample')} attempt {e.get('attempt')}: "
        f"{e.get('outcome')}: {e.get('error')}"
        for e in job.log_events("episode.failed")
    ]
    said += [f"model request retried: {e.get('error')}" for e in job.log_events("model.retry")]
    said += [
        f"{ln['task_id']}/{ln['sample']} line: {ln['outcome']}: {ln.get('error')}"
        for ln in job.lines()
        if ln["outcome"] != "graded"
    ]
    return said


def wait_until(condition: Callable[[], bool], timeout: float = 120, what: str = "") -> None:
    """Poll ``condition`` until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.1)


def sandboxes(engine: PrivateEngine, status: str | None = None) -> list[str]:
    """Ids of agentenv's sandboxes on ``engine`` (optionally in one ``status``)."""
    terms = ["label=agentenv.kind=sandbox", *([f"status={status}"] if status else [])]
    return engine.containers(*terms)


def thinking(engine: PrivateEngine, server: K3Server, n: int = 2) -> None:
    """Wait until ``n`` sandboxes exist and the model has had ``n`` requests: the sandboxes
    are frozen while it thinks (its time to first token). The engine cannot tell: agentenv
    freezes them through the cgroup, not through the engine's pause."""
    wait_until(
        lambda: len(server.requests) >= n and len(sandboxes(engine)) >= n,
        what=f"{n} sandboxes with the model thinking",
    )


def gc(engine: PrivateEngine) -> subprocess.CompletedProcess[str]:
    """`agentenv gc` against ``engine`` (what is ours and whose process is gone). Only on
    Docker: without ``--backend``, gc also collects on Podman, where CI runs other tests at
    the same time (it removed one's sandbox, left ownerless on purpose, under it)."""
    return subprocess.run(
        [sys.executable, "-m", "agentenv", "gc", "--backend", "docker"], env=engine.env,
        capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def started(server: K3Server) -> int:
    """Episodes started so far against ``server`` (each asks for its first turn once)."""
    return sum(
        1 for body in list(server.requests)
        if not any(m["role"] == "assistant" for m in body["messages"])
    )  # fmt: skip


def settle(
    scenario: str,
    job: Job,
    n_tasks: int,
    samples: int,
    before: bytes,
    rerun: int = 0,
    failing: frozenset[str] = frozenset(),
) -> Row:
    """After the fault (and any resume): assert what every scenario must hold, collect
    with gc, and record the row. ``rerun``: episodes cut off without a line (a killed
    runner's), which the resume ran again; ``failing``: tasks whose agent is the fault
    (graded, as failed)."""
    lines = job.lines()
    journal = job.journal()
    assert journal.startswith(before), "a line written before the fault was rewritten"
    last: dict[tuple[str, int], dict[str, Any]] = {}
    graded: Counter[tuple[str, int]] = Counter()
    for line in lines:
        key = (line["task_id"], line["sample"])
        last[key] = line
        graded[key] += line["outcome"] == "graded"
    expected = {(f"greet-{i}", s) for i in range(n_tasks) for s in range(samples)}
    assert set(last) == expected, f"episodes missing or unknown: {expected ^ set(last)}"
    lost = [k for k, line in last.items() if line["outcome"] != "graded"]
    duplicated = [k for k, n in graded.items() if n > 1]
    failed = job.log_events("episode.failed")
    affected = {(e.get("task"), e.get("sample")) for e in failed}
    affected |= {(ln["task_id"], ln["sample"]) for ln in lines if ln["outcome"] != "graded"}
    requests_retried = 0
    for key, line in last.items():
        if line.get("trajectory"):
            turns = json.loads((job.out / line["trajectory"]).read_text())["turns"]
            retries = sum(t["completion"]["retries"] for t in turns)
            requests_retried += retries
            fell_back = any(
                (t["completion"].get("route") or {}).get("fell_back_from") for t in turns
            )
            if retries or fell_back:
                affected.add(key)
    collected = gc(job.engine)
    assert collected.returncode == 0, collected.stderr
    leaked = job.engine.ours()
    row = Row(
        scenario=scenario,
        episodes=len(expected),
        affected=len(affected) + rerun,
        retried=len(failed) + requests_retried + rerun,
        lost=len(lost),
        duplicated=len(duplicated),
        leaked=len(leaked),
        exit=" → ".join(str(code) for code in job.exits),
    )
    ROWS.append(row)
    assert not lost, f"episodes without a grade: {lost}: {[last[k]['error'] for k in lost]}"
    assert not duplicated, f"graded twice: {duplicated}"
    assert not leaked, f"left after gc: {leaked}"
    for line in lines:
        if line["outcome"] == "graded":
            assert line["passed"] != (line["task_id"] in failing), line
        else:
            assert TREATMENT[line["outcome"]].retry, line  # only errors a resume retries
    return row
