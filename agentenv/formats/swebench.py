"""SWE-bench-style instances run as tasks: ``agentenv eval instances.jsonl``.

An instances file is JSON Lines (or a JSON array, as dataset exports write it) with
SWE-bench's fields: ``instance_id``, ``repo``, ``base_commit``, ``problem_statement``,
``test_patch``, ``patch`` (the gold patch: the oracle applies it), ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` (lists of pytest node ids, or those lists JSON-encoded, as the published
datasets have them), and optionally ``image`` (also ``image_name``; else SWE-bench's own
name for the instance's image), ``dockerfile`` (built when the image is absent; relative to
the instances file), ``workdir`` (default ``/testbed``), ``python`` (the interpreter with the
repo's dependencies; default SWE-bench's ``testbed`` environment, else ``python3``) and
``timeout_s``. The image must hold the repo at ``base_commit`` in the workdir.

Each instance becomes an ordinary task folder, written once under the cache
(``$AGENTENV_CACHE``, else ``~/.cache/agentenv``) so that a job over them resumes, regrades
and ships to Ray like any other: ``task.toml`` (a ``swebench`` verifier, see
:class:`agentenv.verify.kinds.swebench.SweBenchCheck`), ``instruction.md`` (the problem statement),
``tests/test.patch`` (hidden from the agent) and ``solution/`` (the gold patch and the
script applying it). ``docs/swebench.md`` has the mapping and what is not supported.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from agentenv.errors import TaskError
from agentenv.formats.native import load_folder
from agentenv.problems import Problem, Problems
from agentenv.tasks import Task

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch")
WORKDIR = "/testbed"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_SOLVE = """#!/bin/bash
# The gold patch of the SWE-bench instance, applied to the repo in the workdir.
set -euo pipefail
git -c safe.directory='*' apply --whitespace=nowarn "$SOLUTION_DIR/gold.patch" \\
  || patch --batch -p1 -i "$SOLUTION_DIR/gold.patch"
"""


def is_instances_file(path: Path) -> bool:
    """Whether ``path`` is an instances file (``.jsonl`` or ``.json``) rather than a task
    folder."""
    return path.is_file() and path.suffix in (".jsonl", ".json")


def cache_dir() -> Path:
    """Where instances' task folders are written."""
    root = os.environ.get("AGENTENV_CACHE") or Path.home() / ".cache" / "agentenv"
    return Path(root) / "swebench"


def read_instances(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The instances in ``path`` with where each is (``file:line`` or ``file[index]``);
    raises :class:`TaskError` naming the file and line for what is not JSON."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot read: {e}") from e
    found: list[tuple[str, Any]] = []
    if path.suffix == ".json" or text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise TaskError(f"{path}: not valid JSON: {e}") from e
        if not isinstance(data, list):
            raise TaskError(f"{path}: a JSON instances file holds a list of instances")
        found = [(f"{path}[{i}]", item) for i, item in enumerate(data)]
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                found.append((f"{path}:{number}", json.loads(line)))
            except ValueError as e:
                raise TaskError(f"{path}:{number}: not valid JSON: {e}") from e
    if not found:
        raise TaskError(f"{path}: no instances in it")
    for where, item in found:
        if not isinstance(item, dict):
            raise TaskError(f"{where}: an instance is a JSON object, got {type(item).__name__}")
    return found


def materialize(path: Path, into: Path | None = None) -> list[Path]:
    """Write each instance in ``path`` as a task folder (under :func:`cache_dir` unless
    ``into`` is given) and return the folders, in the file's order. Folders already written
    with the same content are left alone; raises :class:`TaskError` naming the file, the
    line and the field for an instance that cannot run."""
    path = Path(path).resolve()
    instances = read_instances(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    root = into or cache_dir() / f"{_safe(path.stem)}-{digest}"
    folders: list[Path] = []
    seen: dict[str, str] = {}
    for where, instance in instances:
        files = task_files(instance, where, path.parent)
        instance_id = str(instance["instance_id"])
        if instance_id in seen:
            raise TaskError(f"{where}: instance_id {instance_id!r} is also at {seen[instance_id]}")
        seen[instance_id] = where
        folder = root / instance_id
        _write_folder(folder, files)
        folders.append(folder)
    return folders


def task_files(instance: dict[str, Any], where: str, base: Path) -> dict[str, str]:
    """The files of the task folder for one instance (relative path → text)."""

    def bad(field: str, message: str) -> TaskError:
        return TaskError(f"{where}: {field}: {message}")

    for field in REQUIRED:
        value = instance.get(field)
        if not isinstance(value, str) or not value.strip():
            raise bad(field, "missing" if value is None else "must be a non-empty string")
    for field, value in instance.items():
        if isinstance(value, str) and not _encodable(value):
            raise bad(field, "holds a lone surrogate (\\ud800-\\udfff): not text")
    instance_id = instance["instance_id"]
    if not _ID.fullmatch(instance_id):
        raise bad("instance_id", f"{instance_id!r}: letters, digits, '.', '_' and '-' only")
    fail_to_pass = _tests(instance, "FAIL_TO_PASS", bad, required=True)
    pass_to_pass = _tests(instance, "PASS_TO_PASS", bad, required=False)
    test_files = sorted(_patched_files(instance["test_patch"]))
    if not test_files:
        raise bad("test_patch", "not a git diff (no 'diff --git a/... b/...' line)")
    workdir = str(instance.get("workdir") or WORKDIR)
    if not workdir.startswith("/") or workdir.rstrip("/") == "":
        raise bad("workdir", f"{workdir!r} must be an absolute folder, not '/'")
    verifier: dict[str, Any] = {
        "kind": "swebench",
        "name": instance_id,
        "fail_to_pass": fail_to_pass,
        "pass_to_pass": pass_to_pass,
        "test_files": test_files,
        **_run_fields(instance, bad),
    }
    problem = instance["problem_statement"]
    spec: dict[str, Any] = {
        "id": instance_id,
        "description": next((ln.strip() for ln in problem.splitlines() if ln.strip()), "")[:200],
        "tags": ["swebench", instance["repo"]],
        "workdir": workdir,
    }
    spec.update(_image_fields(instance, base, bad))
    files = {
        "task.toml": _toml(spec) + "\n[verifier]\n" + _toml(verifier),
        "instruction.md": (
            f"The repository {instance['repo']} is checked out in {workdir} at commit "
            f"{instance['base_commit']}. Resolve the issue below by changing its code "
            "(not its tests).\n\n" + problem.rstrip() + "\n"
        ),
        "tests/test.patch": instance["test_patch"],
    }
    gold = instance.get("patch")
    if gold is not None:
        if not isinstance(gold, str) or not _patched_files(gold):
            raise bad("patch", "not a git diff (no 'diff --git a/... b/...' line)")
        files["solution/solve.sh"] = _SOLVE
        files["solution/gold.patch"] = gold
    return files


def _run_fields(instance: dict[str, Any], bad: Any) -> dict[str, Any]:
    """The verifier's ``python``, ``timeout_s`` and ``on_suspicious``, those the instance
    gives."""
    fields: dict[str, Any] = {}
    python, timeout = instance.get("python"), instance.get("timeout_s")
    if python is not None:
        if not isinstance(python, str) or not python.strip():
            raise bad("python", f"{python!r}: the interpreter's name or absolute path")
        fields["python"] = python
    if timeout is not None:
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
            raise bad("timeout_s", f"{timeout!r} is not a number of seconds")
        if not 0 < timeout < 7 * 24 * 3600:  # NaN and infinity too
            raise bad("timeout_s", f"{timeout!r} is not a timeout (0 < seconds < a week)")
        fields["timeout_s"] = timeout
    flags = instance.get("on_suspicious")
    if flags is not None:
        if flags not in ("zero", "review"):
            raise bad("on_suspicious", f"{flags!r}: either 'zero' or 'review'")
        fields["on_suspicious"] = flags
    return fields


def _image_fields(instance: dict[str, Any], base: Path, bad: Any) -> dict[str, Any]:
    """The task's ``image``, and its ``dockerfile`` when the instance gives one."""
    instance_id = instance["instance_id"]
    dockerfile = instance.get("dockerfile")
    image = instance.get("image") or instance.get("image_name")
    if dockerfile is None:
        return {"image": str(image) if image else swebench_image(instance_id)}
    if not isinstance(dockerfile, str) or not (base / dockerfile).is_file():
        raise bad("dockerfile", f"{base / str(dockerfile)} not found")
    return {
        "dockerfile": str((base / dockerfile).resolve()),
        "image": str(image) if image else f"agentenv/swebench-{instance_id.lower()}",
    }


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def swebench_image(instance_id: str) -> str:
    """The name SWE-bench's harness gives an instance's evaluation image."""
    return f"swebench/sweb.eval.x86_64.{instance_id.lower().replace('__', '_1776_')}:latest"


def _tests(instance: dict[str, Any], field: str, bad: Any, *, required: bool) -> list[str]:
    value = instance.get(field, None if required else [])
    if isinstance(value, str):  # the published datasets hold the lists JSON-encoded
        try:
            value = json.loads(value)
        except ValueError as e:
            raise bad(field, f"not a list, nor a JSON-encoded one: {e}") from e
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise bad(field, "must be a list of test ids")
    if required and not value:
        raise bad(field, "empty: nothing would tell a fix from no change")
    for test in value:
        if test.startswith("-"):
            raise bad(field, f"{test!r} would reach pytest as an option")
        if "::" not in test:
            raise bad(
                field,
                f"{test!r} is not a pytest node id (path/to/test_file.py::test_name); only "
                "pytest-based instances run (docs/swebench.md)",
            )
    return list(value)


def _patched_files(diff: str) -> set[str]:
    """The paths a git diff touches (both sides of a rename)."""
    return {p for a, b in _DIFF_FILE.findall(diff) for p in (a, b) if p != "/dev/null"}


def _toml(table: dict[str, Any]) -> str:
    """TOML for a flat table of strings, numbers and lists of strings."""
    lines = []
    for key, value in table.items():
        if isinstance(value, list):
            lines.append(f"{key} = [{', '.join(_toml_string(v) for v in value)}]")
        elif isinstance(value, str):
            lines.append(f"{key} = {_toml_string(value)}")
        else:
            lines.append(f"{key} = {value!r}")
    return "\n".join(lines) + "\n"


def _toml_string(value: str) -> str:
    # a JSON string is a TOML basic string, but for DEL, which TOML wants escaped
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _write_folder(folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` as ``folder``, replacing it whole (never half-written) unless it
    already holds exactly them."""
    if folder.is_dir() and _holds(folder, files):
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        for name, text in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)


def _holds(folder: Path, files: dict[str, str]) -> bool:
    present = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    if present != set(files):
        return False
    return all((folder / name).read_text() == text for name, text in files.items())


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "instances"


def can_load(path: Path) -> bool:
    """Whether ``path`` is an instances file (see :func:`is_instances_file`)."""
    return is_instances_file(path)


def load(path: Path) -> list[Task]:
    """The tasks of the instances in ``path``, written as task folders (:func:`materialize`)
    and loaded as agentenv's; raises :class:`~agentenv.problems.Problems` naming every
    problem of every instance."""
    tasks: list[Task] = []
    problems: list[Problem] = []
    for folder in materialize(path):
        try:
            tasks.append(load_folder(folder))
        except Problems as e:
            problems += e.problems
    if problems:
        raise Problems(problems)
    return tasks


__all__ = [
    "can_load",
    "is_instances_file",
    "load",
    "materialize",
    "read_instances",
    "swebench_image",
    "task_files",
]
