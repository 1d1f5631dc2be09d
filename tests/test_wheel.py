"""A plain `pip install` of the wheel verifies: the checker programs ship inside the
package. The wheel is built from this checkout and installed into a new virtualenv, which
borrows only the third-party dependencies of the test environment (agentenv itself is not
importable from there); an eval of a task whose verifier uses pytest, the outputs harness,
a file check and a command check then runs from a folder outside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "agentenv" / "formats" / "schemas"
SCHEMAS = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
VERIFIERS = sorted(p.name for p in (ROOT / "verifiers").iterdir() if p.is_file())
MODULES = sorted(
    [
        str(p.relative_to(ROOT))
        for p in (ROOT / "agentenv").rglob("*")
        if p.suffix in (".py", ".sh", ".css", ".js")
    ]
    + ["agentenv_verifiers.py"]  # the top-level id verifiers.v1 loads agentenv by
)

TASK_TOML = """
[verifier]
kind = "composite"
mode = "all"

[[verifier.checks]]
kind = "pytest"

[[verifier.checks]]
kind = "outputs"
cases = "cases.json"
function = "calc:add"

[[verifier.checks]]
kind = "file"
path = "calc.py"
regex = "a \\\\+ b"

[[verifier.checks]]
kind = "command"
command = "test \\"$($AS_AGENT python3 -c 'import calc; print(calc.add(2, 2))')\\" = 4"
"""


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_installed_wheel_verifies(tmp_path: Path) -> None:
    # built from a copy: an in-tree build reuses the checkout's build/lib (where a deleted
    # module lingers, and which concurrent runs share)
    src = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("agentenv", "verifiers"):
        shutil.copytree(ROOT / name, src / name, ignore=skip)
    for name in ("pyproject.toml", "README.md", "agentenv_verifiers.py"):
        shutil.copy(ROOT / name, src / name)
    # the wheel carries every module (and no other) and every checker program
    run(sys.executable, "-m", "pip", "wheel", "--no-deps",
        "-q", "-w", tmp_path / "dist", src, cwd=tmp_path)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("agentenv-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"agentenv/_checkers/{n}" for n in VERIFIERS} <= names
    shipped = {n for n in names if not n.startswith("agentenv/_checkers/")}
    assert {n for n in shipped if n.endswith((".py", ".sh", ".css", ".js"))} == set(MODULES)
    assert SCHEMAS and {f"agentenv/formats/schemas/{n}" for n in SCHEMAS} <= names

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
        "-q", "--no-deps", wheel, cwd=tmp_path)  # fmt: skip
    # the dependencies, from the test environment's site-packages (a path, not a site dir:
    # its .pth files, agentenv's editable finder among them, are not read)
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    task = tmp_path / "tasks" / "calc"
    (task / "workspace").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "workspace" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (task / "solution.sh").write_text("sed -i 's/a - b/a + b/' calc.py\n")
    (task / "instruction.md").write_text("Fix add() in calc.py.\n")
    (task / "task.toml").write_text(TASK_TOML)
    (task / "tests" / "test_calc.py").write_text(
        "import calc\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"
    )
    cases = [{"name": "small", "args": [1, 2], "expect": 3}, {"args": [-1, 1], "expect": 0}]
    (task / "tests" / "cases.json").write_text(json.dumps(cases))

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = run(venv / "bin" / "python", "-c", "import agentenv; print(agentenv.__file__)",
                cwd=outside)  # fmt: skip
    assert where.strip().startswith(str(venv)), where
    # the JSON Schemas of the formats ship as package data, printed from there
    cases_schema = json.loads(run(venv / "bin" / "agentenv", "schema", "cases", cwd=outside))
    assert cases_schema["$defs"]["Case"]["properties"]["expect"], cases_schema
    for model, reward in (("oracle", 1.0), ("null", 0.0)):
        out = tmp_path / f"job-{model}"
        run(venv / "bin" / "agentenv", "eval", task, "--model", model, "--out", out, cwd=outside)
        (line,) = (out / "results.jsonl").read_text().splitlines()
        result = json.loads(line)
        assert result["outcome"] == "graded", result
        assert result["reward"] == reward, result["score"]
    # SWE-bench-style instances (the example's), verified by the wheel's repo-mode runner
    out = tmp_path / "job-swebench"
    instances = ROOT / "examples" / "swebench" / "instances.jsonl"
    env = {**os.environ, "AGENTENV_CACHE": str(tmp_path / "cache")}
    run(venv / "bin" / "agentenv", "eval", instances, "--model", "oracle", "--out", out,
        cwd=outside, env=env)  # fmt: skip
    rewards = [json.loads(line)["reward"] for line in (out / "results.jsonl").open()]
    assert rewards == [1.0, 1.0], (out / "results.jsonl").read_text()
