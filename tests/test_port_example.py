"""examples/port_jsonl.py as docs/porting.md uses it: a JSONL of problems made here (odd ids,
cases, pytest code, both, and lines that cannot be ported) becomes task folders that the
oracle passes and the null policy fails, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentenv.runner.results import load_results

ROOT = Path(__file__).resolve().parents[1]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


def test_a_ported_benchmark_grades_the_oracle_1_and_null_0(tmp_path: Path) -> None:
    problems = [
        line
        for line in (ROOT / "examples" / "port_problems.jsonl").read_text().splitlines()
        if line.strip()
    ]
    odd = {
        "task_id": "Team Bench/#11 (v2)",
        "prompt": "Return the text reversed.\n" + "Mind unicode. " * 200,
        "entry_point": "rev",
        "canonical_solution": "def rev(s):\n    return s[::-1]\n",
        "cases": [{"args": ["héllo"], "expected": "olléh"}],
    }
    bad = [
        "{not json",
        json.dumps({"task_id": "x", "prompt": "p", "entry_point": "f", "canonical_solution": "c"}),
        json.dumps({**odd, "task_id": "x2", "entry_point": "not a name"}),
    ]
    source = tmp_path / "problems.jsonl"
    source.write_text("\n".join([*problems, json.dumps(odd), *bad]) + "\n")
    tasks = tmp_path / "tasks"
    port = run(sys.executable, str(ROOT / "examples" / "port_jsonl.py"), str(source), str(tasks))
    assert port.returncode == 1  # some lines could not be ported: said, and the rest are
    n = len(problems)
    assert f"ported {n + 1} problems" in port.stdout
    assert f"problems.jsonl:{n + 2}: Expecting property name" in port.stderr
    assert f"problems.jsonl:{n + 3}: neither cases nor test" in port.stderr
    assert f"problems.jsonl:{n + 4}: entry_point: 'not a name' is not a Python name" in port.stderr
    assert (tasks / "team-bench-11-v2" / "task.toml").is_file()

    for model, reward in (("oracle", 1.0), ("null", 0.0)):
        out = tmp_path / model
        done = run(sys.executable, "-m", "agentenv", "eval", str(tasks), "--model", model,
                   "--out", str(out), "--concurrency", "2")  # fmt: skip
        assert done.returncode == 0, done.stderr
        results = load_results(out)
        assert len(results) == n + 1
        assert {r.task_id: r.reward for r in results.values()} == {
            r.task_id: reward for r in results.values()
        }, [(r.task_id, r.reward, r.error) for r in results.values()]
        assert all(r.outcome == "graded" for r in results.values())
