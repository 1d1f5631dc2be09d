"""`agentenv validate` as a user runs it: task folders are checked without Docker or a model,
every problem is printed with its file, line (where the format has one) and field, and the
exit status says whether any was found. Loading a task refuses a bad cases file up front,
and a wrong `serve-model --script` file is named the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentenv.errors import TaskError
from agentenv.tasks import load_task, load_tasks

pytestmark = pytest.mark.no_docker

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = '[verifier]\nkind = "outputs"\ncases = "cases.json"\nfunction = "calc:add"\n'


def agentenv(*args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agentenv", *map(str, args)]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def task(root: Path, name: str, toml: str = OUTPUTS, cases: Any = None) -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text("Fix add() in calc.py.\n")
    if cases is not None:
        text = cases if isinstance(cases, str) else json.dumps(cases, indent=1)
        (folder / "tests" / "cases.json").write_text(text)
    return folder


def test_every_problem_of_every_task_is_named_with_file_line_and_field(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    task(tasks, "good", cases=[{"args": [1, 2], "expect": 3}])
    misspelt = task(tasks, "misspelt", cases=[{"args": [1, 2], "expected": 3}, {"args": []}])
    broken_json = task(tasks, "broken-json", cases='[\n {"args": [1, 2],\n  "expect": 3,\n]\n')
    no_cases = task(tasks, "no-cases")
    bad_toml = task(tasks, "bad-toml", toml='id = "x"\ntags = ["a"\nimage = "b"\n')
    fields = task(tasks, "fields", toml='dockerfile = "Dockerfile"\nmemroy = 1\ncpus = "two"\n')
    (fields / "instruction.md").unlink()

    done = agentenv("validate", tasks)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    cases = f"{misspelt}/tests/cases.json"
    expected = [
        f"{cases}: case 0.expected: Extra inputs are not permitted: did you mean 'expect'?",
        f"{cases}: case 1: needs either expect or raises",
        f"{broken_json}/tests/cases.json:4: not valid JSON: ",
        f"{no_cases}/tests/cases.json: cannot read the cases file: [Errno 2]",
        f"{bad_toml}/task.toml:3: not valid TOML:",
        f"{fields}/instruction.md: not found",
    ]
    for want in expected:
        assert any(line.startswith(f"error: {want}") for line in errors), (want, done.stderr)
    assert errors[-1] == f"error: {len(errors) - 1} problems found"
    assert not any("/good/" in line for line in errors)

    (fields / "instruction.md").write_text("Fix it.\n")
    again = agentenv("validate", fields)
    assert again.returncode == 2
    assert (
        f"{fields}/task.toml: memroy: Extra inputs are not permitted: did you mean 'memory'?"
        in (again.stderr)
    )
    assert f"{fields}/task.toml: cpus: Input should be a valid number" in again.stderr


def test_valid_tasks_exit_0_and_a_missing_path_is_bad_input(tmp_path: Path) -> None:
    done = agentenv(
        "validate", ROOT / "environments", ROOT / "examples" / "swebench" / "instances.jsonl"
    )
    assert done.returncode == 0, done.stderr
    assert "tasks valid" in done.stdout and "harbor-health-service" in done.stdout
    missing = agentenv("validate", tmp_path / "nowhere")
    assert missing.returncode == 2
    assert f"{tmp_path / 'nowhere'}: no such task folder" in missing.stderr


def test_loading_refuses_a_bad_cases_file_before_anything_runs(tmp_path: Path) -> None:
    folder = task(tmp_path, "calc", cases=[{"name": "sum", "args": [1, 2], "expected": 3}])
    with pytest.raises(TaskError) as caught:
        load_tasks([tmp_path])
    message = str(caught.value)
    assert f"{folder}/tests/cases.json: case 0 (sum).expected: " in message, message
    assert "did you mean 'expect'?" in message
    (folder / "tests" / "cases.json").write_text(json.dumps([{"args": [1, 2], "expect": 3}]))
    assert load_task(folder).id == "calc"


@pytest.mark.parametrize(
    ("case", "why"),
    [
        (
            {"name": "a", "args": [], "expect": 1, "match": "x"},
            "case 0 (a): match goes with raises",
        ),
        (
            {"name": "a", "args": [], "raises": "E", "match": "("},
            "case 0 (a): match is not a regex",
        ),
        ({"name": "a", "args": [], "expect": 1, "requires": ["b"]}, "no case is named 'b'"),
        ({"name": "a", "args": [], "stdin": "x", "expect": 1}, "stdin cannot be used in function"),
    ],
)
def test_a_case_that_cannot_be_judged_is_refused_at_load(
    tmp_path: Path, case: dict[str, Any], why: str
) -> None:
    folder = task(tmp_path, "calc", cases=[case])
    with pytest.raises(TaskError, match=r"cases\.json: ") as caught:
        load_task(folder)
    assert why in str(caught.value)


def test_a_wrong_script_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
        {"contnet": "done"},
    ]
    script.write_text(json.dumps(turns))
    done = agentenv("serve-model", "--script", script, "--port", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{script}: turn 0.tool_calls.0.arguments: " in done.stderr, done.stderr
    assert 'a string holding JSON, as "{\\"command\\": \\"ls\\"}"' in done.stderr
    assert f"{script}: turn 1.contnet: Extra inputs are not permitted: did you mean 'content'?" in (
        done.stderr
    )
    script.write_text('[\n{"content": "x"},\n]')
    broken = agentenv("serve-model", "--script", script, "--port", "0")
    assert broken.returncode == 2 and f"{script}:3: not valid JSON" in broken.stderr
