"""`agentenv eval` and `agentenv report` as a user runs them, through a pipe (no terminal):
progress as plain lines, a budget that stops a job and a higher one that finishes it, rows
in natural order with subtotals per tag, the totals-only and failures-only views, and a
folder of another job refused before anything else is printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from agentenv.runner.results import load_results
from agentenv.sandbox.docker import connect
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.testing import K3Server
from tests.eval.test_eval import make_task, solving_script

ENV = {**os.environ, "COLUMNS": "200"}


def agentenv(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agentenv", *args]
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)


def test_budget_views_and_refusal_through_the_cli(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    for name, tags in (("task-10", ("hard",)), ("task-2", ("easy",)), ("task-1", ("easy",))):
        make_task(tasks, name, tags=tags)
    wrong = make_task(tasks, "task-3", tags=("hard",))
    # the model writes 'hello task-3'; this check wants something else
    (wrong / "tests" / "check.sh").write_text(
        "echo \"wanted 'bye', got '$(cat greeting.txt)'\"; test \"$(cat greeting.txt)\" = bye\n"
    )
    job = tmp_path / "job"
    with K3Server(solving_script) as server:
        model = f"{server.base_url}#input=1&output=2"
        run = ("eval", str(tasks), "--model", model, "--concurrency", "1", "--out", str(job))

        stopped = agentenv(*run, "--max-cost", "0.000001")
        assert stopped.returncode == 3, stopped.stderr
        assert len(load_results(job)) == 1 and len(server.requests) == 1
        assert re.search(r"stopped: the job has spent \$0\.\d+ of its --max-cost", stopped.stderr)
        assert "3 episodes not started" in stopped.stderr
        assert "eval 1/4 done (25%)" in stopped.stderr  # plain progress lines in a pipe
        assert "budget spent" in stopped.stderr
        summary = json.loads((job / "summary.json").read_text())
        assert summary[-1]["stopped"] == "max_cost" and summary[-1]["cost_usd"] > 0

        done = agentenv(*run, "--max-cost", "100")
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 4
    assert "resuming" in done.stderr and "stopped" not in done.stderr
    assert re.search(
        r"^eval 4/4 done \(100%\) · 3 passed · 0 running · 0 errors", done.stderr, re.M
    )
    rows = [line.split("│")[1].strip() for line in done.stdout.splitlines() if "│" in line]
    assert rows == [
        "task-1",
        "task-2",
        "task-3",
        "task-10",
        "tag:easy",
        "tag:hard",
        "total",
    ]
    assert "$/solved" in done.stdout
    assert re.search(r"^job \d+\.\d s wall \(\d+\.\d\d episodes/s\) · episodes ", done.stdout, re.M)
    assert re.search(r"prepare .*create .*model .*tools .*verify .*teardown", done.stdout)
    summary = json.loads((job / "summary.json").read_text())
    total = summary[-1]
    assert total["stopped"] is None and total["passed"] == 3
    assert total["usd_per_solved"] == total["cost_usd"] / 3

    totals = agentenv("report", str(job), "--totals")
    assert totals.returncode == 0, totals.stderr
    names = [line.split("│")[1].strip() for line in totals.stdout.splitlines() if "│" in line]
    assert names == ["tag:easy", "tag:hard", "total"]

    # the job's end says how to read it; that command builds its site from the real folder
    shown = re.search(r"^to read it: (agentenv view .+)$", done.stdout, re.M)
    assert shown is not None and shown.group(1) == f"agentenv view {job}"
    site = agentenv("view", str(job))
    assert site.returncode == 0, site.stderr
    index = Path(site.stdout.strip())
    pages = sorted(p.name for p in (index.parent / "episodes").glob("*.html"))
    assert pages == ["task-1--0.html", "task-10--0.html", "task-2--0.html", "task-3--0.html"]
    page = (index.parent / "episodes" / "task-3--0.html").read_text()
    assert "wanted &#x27;bye&#x27;, got &#x27;hello task-3&#x27;" in page  # the check's detail
    assert "class='call'" in page and "greeting.txt" in page  # the model's tool calls

    failures = agentenv("report", str(job), "--failures")
    assert failures.returncode == 0, failures.stderr
    assert "1 not passed" in failures.stdout
    assert "task-3" in failures.stdout and "wanted 'bye', got 'hello task-3'" in failures.stdout
    assert "task-1 " not in failures.stdout

    # another job pointed at this folder: refused first, saying what differs, nothing else
    before = (job / "results.jsonl").read_bytes(), (job / "log.jsonl").read_bytes()
    other = agentenv("eval", str(tasks), "--model", "oracle", "--samples", "2", "--out", str(job))
    assert other.returncode == 2 and other.stdout == ""
    assert "resuming" not in other.stderr and "eval " not in other.stderr
    message = " ".join(other.stderr.split())
    assert "holds results of a different job" in message
    assert "model:" in message and "samples: 1 then, 2 now" in message
    assert len(other.stderr.splitlines()) <= 6  # compact
    assert ((job / "results.jsonl").read_bytes(), (job / "log.jsonl").read_bytes()) == before


def test_a_workspace_module_named_like_the_standard_library_is_warned_of(tmp_path: Path) -> None:
    # the reference solution is right, but the hidden tests import the standard library's
    # calendar, not the workspace's: the oracle scores 0, and the warning says why up front
    task = tmp_path / "tasks" / "month-names"
    (task / "workspace").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text('[verifier]\nkind = "pytest"\n')
    (task / "instruction.md").write_text("Write calendar.month_label(n): 'Jan' for 1.\n")
    (task / "workspace" / "calendar.py").write_text(
        "def month_label(n):\n    raise NotImplementedError\n"
    )
    (task / "workspace" / "helpers.py").write_text("")
    (task / "solution.sh").write_text(
        "cat > calendar.py <<'EOF'\ndef month_label(n):\n    return ['Jan', 'Feb'][n - 1]\nEOF\n"
    )
    (task / "tests" / "test_calendar.py").write_text(
        "from calendar import month_label\n\ndef test_jan():\n    assert month_label(1) == 'Jan'\n"
    )
    done = agentenv(
        "eval", str(tmp_path / "tasks"), "--model", "oracle", "--out", str(tmp_path / "j")
    )
    assert (
        "warning: month-names: workspace/calendar.py has the name of the standard " in done.stderr
    )
    assert "helpers.py" not in done.stderr and "Traceback" not in done.stderr
    (result,) = load_results(tmp_path / "j").values()
    assert result.outcome == "graded" and result.reward == 0.0


def test_the_oracle_gets_the_whole_solution_folder(tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "with-helpers"
    (task / "solution" / "data").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "workspace").mkdir()
    (task / "task.toml").write_text(
        '[verifier]\nkind = "file"\npath = "answer.txt"\nequals = "42 from a helper\\n"\n'
    )
    (task / "instruction.md").write_text("Write the answer to answer.txt.\n")
    (task / "solution" / "solve.sh").write_text('python3 "$SOLUTION_DIR/helper.py" > answer.txt\n')
    (task / "solution" / "helper.py").write_text(
        "import pathlib, os\n"
        "print(pathlib.Path(os.environ['SOLUTION_DIR'], 'data', 'n.txt').read_text().strip(),"
        " 'from a helper')\n"
    )
    (task / "solution" / "data" / "n.txt").write_text("42\n")
    done = agentenv("eval", str(task), "--model", "oracle", "--out", str(tmp_path / "j"))
    assert done.returncode == 0, done.stderr
    (result,) = load_results(tmp_path / "j").values()
    assert result.reward == 1.0, result


def test_errors_exit_5_and_are_redone_on_request(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "fine")
    # an image not built yet: a task error, which a plain resume keeps (nothing changed)
    image = f"127.0.0.1:9/agentenv-retry-{uuid.uuid4().hex[:8]}:1"
    unbuilt = make_task(tasks, "unbuilt")
    toml = (unbuilt / "task.toml").read_text()
    (unbuilt / "task.toml").write_text(f"image = {image!r}\n" + toml)
    # no reference solution: the oracle cannot play it until its author adds one
    (make_task(tasks, "unsolved") / "solution.sh").unlink()
    job = tmp_path / "job"
    run = ("eval", str(tasks), "--model", "oracle", "--concurrency", "1", "--out", str(job))

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in (job / "results.jsonl").read_text().splitlines()]

    first = agentenv(*run)
    assert first.returncode == 5, first.stderr
    message = " ".join(first.stderr.split())
    assert "2 episodes ended in an error (not a grade" in message, message
    redo = f"to run them again: agentenv eval {tasks} --model oracle --concurrency 1 --out {job}"
    assert f"{redo} --retry-errors" in message, message
    assert [r["outcome"] for r in lines()] == ["graded", "task_error", "task_error"]
    fine = lines()[0]

    plain = agentenv(*run)  # resumes as before: errors that cannot be retried are kept
    assert plain.returncode == 5 and len(lines()) == 3, plain.stderr

    # the author adds the solution: the job says how to run just that task again
    (tasks / "unsolved" / "solution.sh").write_text("echo 'hello unsolved' > greeting.txt\n")
    before = (job / "results.jsonl").read_bytes(), (job / "config.json").read_bytes()
    changed = agentenv(*run)
    assert changed.returncode == 2 and changed.stdout == "", changed.stderr
    message = " ".join(changed.stderr.split())
    assert "tasks: 1 changed (unsolved)" in message, message
    assert "add --redo-changed" in message and "another --out folder" in message, message
    assert ((job / "results.jsonl").read_bytes(), (job / "config.json").read_bytes()) == before

    redone = agentenv(*run, "--redo-changed")
    assert redone.returncode == 5, redone.stderr  # the image is still missing
    assert "running the changed tasks again (their earlier results dropped): unsolved" in (
        redone.stderr
    )
    assert [(r["task_id"], r["outcome"]) for r in lines()] == [
        ("fine", "graded"),
        ("unbuilt", "task_error"),
        ("unsolved", "graded"),
    ]
    assert lines()[0] == fine and "1 episode ended in an error" in redone.stderr

    # the image is built now: --retry-errors runs the errored episode, and nothing else
    api = connect().api
    repository, tag = image.rsplit(":", 1)
    api.tag(BASE_IMAGE, repository, tag)
    try:
        retried = agentenv(*run, "--retry-errors")
    finally:
        api.remove_image(image)
    assert retried.returncode == 0, retried.stderr
    assert "--retry-errors" not in retried.stderr
    assert [(r["task_id"], r["outcome"]) for r in lines()][-1] == ("unbuilt", "graded")
    assert len(lines()) == 4 and lines()[0] == fine
