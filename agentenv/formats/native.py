"""agentenv's own task format: a folder with ``task.toml``, ``instruction.md`` and the
files they name (``docs/formats.md``)."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentenv.cases import read_cases
from agentenv.problems import Problem, Problems, from_toml, from_validation
from agentenv.tasks import FROM_THE_FOLDER, Task
from agentenv.verify import OutputsCheck, leaf_checks

Fields = Callable[[dict[str, Any], Path, Path], dict[str, Any]]
"""Turns another format's task.toml (``raw``, the folder, the file) into a Task's fields."""


def can_load(path: Path) -> bool:
    """Whether ``path`` is a task folder (it has ``task.toml``)."""
    return (path / "task.toml").is_file()


def load(path: Path) -> list[Task]:
    """The task in the folder ``path``."""
    return [load_folder(path)]


def read_spec(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The folder's task.toml and what it holds; raises :class:`Problems` naming the file."""
    spec_file = folder / "task.toml"
    if not spec_file.is_file():
        raise Problems([Problem(spec_file, "not found (a task folder needs task.toml)")])
    try:
        return spec_file, tomllib.loads(spec_file.read_text())
    except tomllib.TOMLDecodeError as e:
        raise Problems([from_toml(spec_file, e)]) from e
    except UnicodeDecodeError as e:
        raise Problems([Problem(spec_file, f"not valid TOML: {e}")]) from e


def load_folder(
    folder: Path | str, *, fields: Fields | None = None, rename: dict[str, str] | None = None
) -> Task:
    """Load and validate the task in ``folder``: its task.toml (read through ``fields`` when
    it is another format's, whose field names ``rename`` maps back for errors),
    instruction.md, and the files it names (a Dockerfile, each outputs check's cases file).
    Raises :class:`~agentenv.problems.Problems` naming every problem found, each with its
    file and field."""
    folder = Path(folder)
    spec_file, raw = read_spec(folder)
    problems: list[Problem] = []
    if fields is not None:
        try:
            raw = fields(raw, folder, spec_file)
        except Problems as e:
            problems += e.problems
    for key in FROM_THE_FOLDER:
        if key in raw:
            problems.append(Problem(spec_file, "not a task.toml field", field=key))
    raw.setdefault("id", folder.resolve().name)
    instruction_file = folder / "instruction.md"
    stepped = raw.get("multi_step") is not None  # each step has its own instruction
    if not instruction_file.is_file() and not stepped:
        problems.append(Problem(instruction_file, "not found (the agent's instruction goes there)"))
    elif not stepped and not instruction_file.read_text().strip():
        problems.append(Problem(instruction_file, "empty"))
    if problems:
        raise Problems(problems)
    if stepped and not instruction_file.is_file():
        raw["instruction"] = raw["multi_step"]["steps"][0]["instruction"]
    else:
        raw["instruction"] = instruction_file.read_text()
    raw["folder"] = folder.resolve()
    try:
        task = Task.model_validate(raw)
    except ValidationError as e:
        raise Problems(from_validation(spec_file, e, model=Task, rename=rename)) from e
    problems = _named_files(task, spec_file)
    if problems:
        raise Problems(problems)
    return task


def _named_files(task: Task, spec_file: Path) -> list[Problem]:
    """What is wrong with the files the task names: its Dockerfile exists, and each outputs
    check's cases file (on the host, hidden from the agent) is one the verifier can use."""
    assert task.folder is not None
    problems = []
    if task.dockerfile is not None and not (task.folder / task.dockerfile).is_file():
        missing = f"{task.folder / task.dockerfile} not found"
        problems.append(Problem(spec_file, missing, field="dockerfile"))
    checks = leaf_checks(task.verifier) if task.verifier is not None else []
    for check in checks:
        if isinstance(check, OutputsCheck):
            try:
                read_cases(task.folder / "tests" / check.cases, check)
            except Problems as e:
                problems += e.problems
    return problems
