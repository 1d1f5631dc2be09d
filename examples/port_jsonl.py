"""Port a JSONL benchmark of Python problems to agentenv task folders.

Each line is one problem, in the shape most function-level benchmarks share:

    {"task_id": "Mbpp/2", "prompt": "Write a function ...", "entry_point": "similar_elements",
     "canonical_solution": "def similar_elements(a, b): ...",
     "cases": [{"args": [[3, 4, 5, 6], [5, 7, 4, 10]], "expected": [4, 5]}],
     "test": "from solution import similar_elements\\ndef test_x(): ...",
     "tags": ["easy"]}

``cases`` become an ``outputs`` check (the inputs and answers stay on the host); a ``test``
(pytest code) becomes a ``pytest`` check; a problem with both gets both, all or nothing.
The agent writes ``solution.py`` in its workdir; the oracle copies the canonical solution
there from ``solution/``.

Usage: python3 examples/port_jsonl.py problems.jsonl OUT_DIR
Then:  agentenv eval OUT_DIR --model oracle   (every task should pass)
       agentenv eval OUT_DIR --model null     (none should)
A line that cannot be ported is named (file:line and the field), and the others still are.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

MODULE = "solution"  # not a standard-library name: the hidden tests must see the agent's


class Unportable(ValueError):
    """A problem that cannot become a task, and why."""


def folder_name(task_id: str) -> str:
    """A task id as a folder name: ``Mbpp/2`` → ``mbpp-2``."""
    name = re.sub(r"[^a-z0-9._-]+", "-", task_id.lower()).strip(".-_")
    if not name:
        raise Unportable(f"task_id {task_id!r} has no letter or digit to name a folder by")
    return name


def _text(problem: dict[str, Any], key: str) -> str:
    value = problem.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Unportable(f"{key}: missing or not a non-empty string")
    return value


def port(problem: dict[str, Any], out: Path) -> Path:
    """Write one problem as a task folder under ``out``; returns the folder."""
    task_id = _text(problem, "task_id")
    entry = _text(problem, "entry_point")
    if not entry.isidentifier():
        raise Unportable(f"entry_point: {entry!r} is not a Python name")
    prompt, solution = _text(problem, "prompt"), _text(problem, "canonical_solution")
    cases, test = problem.get("cases"), problem.get("test")
    if cases is None and test is None:
        raise Unportable("neither cases nor test: nothing would check the answer")
    checks: list[str] = []
    files: dict[str, str] = {}
    if cases is not None:
        if not isinstance(cases, list) or not cases:
            raise Unportable("cases: must be a non-empty list")
        hidden = []
        for i, case in enumerate(cases):
            if not isinstance(case, dict) or "args" not in case or "expected" not in case:
                raise Unportable(f"cases[{i}]: needs args and expected")
            hidden.append({"name": f"case {i}", "args": case["args"], "expect": case["expected"]})
        files["tests/cases.json"] = json.dumps(hidden, indent=1) + "\n"
        checks.append(
            f'[[verifier.checks]]\nkind = "outputs"\ncases = "cases.json"\n'
            f'function = "{MODULE}:{entry}"\n'
        )
    if test is not None:
        if not isinstance(test, str) or not test.strip():
            raise Unportable("test: must be pytest code")
        files["tests/test_solution.py"] = test
        checks.append('[[verifier.checks]]\nkind = "pytest"\n')
    tags = problem.get("tags", [])
    if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise Unportable("tags: must be a list of strings")
    folder = out / folder_name(task_id)
    files["task.toml"] = (
        f"id = {json.dumps(folder.name)}\n"
        f"description = {json.dumps('Ported from ' + task_id)}\n"
        f"tags = {json.dumps(tags)}\n\n"
        '[verifier]\nkind = "composite"\nmode = "all"\n\n' + "\n".join(checks)
    )
    files["instruction.md"] = (
        f"{prompt.strip()}\n\nWrite it as `{entry}` in `{MODULE}.py`, in the current folder.\n"
    )
    files[f"workspace/{MODULE}.py"] = (
        f"def {entry}(*args, **kwargs):\n    raise NotImplementedError\n"
    )
    files[f"solution/{MODULE}.py"] = solution
    files["solution/solve.sh"] = f'cp "$SOLUTION_DIR/{MODULE}.py" {MODULE}.py\n'
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def main(argv: list[str]) -> int:
    """Port every line of ``argv[0]`` into ``argv[1]``; exit 1 if any line could not be."""
    if len(argv) != 2:
        print("usage: python3 examples/port_jsonl.py problems.jsonl OUT_DIR", file=sys.stderr)
        return 2
    source, out = Path(argv[0]), Path(argv[1])
    ported, bad = 0, 0
    seen: dict[str, int] = {}
    for number, line in enumerate(source.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            problem = json.loads(line)
            if not isinstance(problem, dict):
                raise Unportable("not a JSON object")
            name = folder_name(_text(problem, "task_id"))
            if name in seen:
                raise Unportable(f"task_id: same folder name {name!r} as line {seen[name]}")
            seen[name] = number
            port(problem, out)
            ported += 1
        except (json.JSONDecodeError, Unportable) as e:
            bad += 1
            print(f"{source}:{number}: {e}", file=sys.stderr)
    print(f"ported {ported} problems to {out}/" + (f"; {bad} could not be" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
