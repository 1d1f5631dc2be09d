"""The task spec and its loader: one folder per task.

```
my-task/
  task.toml        id, description, tags, image or Dockerfile, workdir, limits, verifier
  instruction.md   what the agent is asked to do
  workspace/       copied into the sandbox's workdir at the start
  tests/           hidden: copied in only after the agent is done, for the verifier
  solution.sh      the reference solution, run by the oracle policy (or solution/solve.sh,
                   with the files next to it in $SOLUTION_DIR)
```
Everything is validated on load; a bad task names its file and the field.
"""

from __future__ import annotations

import hashlib
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from agentenv.agent.tools import DEFAULT_TOOLS, Tool, tools_named
from agentenv.agent.trajectory import Limits
from agentenv.cases import read_cases
from agentenv.errors import TaskError
from agentenv.harbor import HARBOR_FIELDS, is_harbor, task_fields
from agentenv.problems import Problem, Problems, from_toml, from_validation
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.spec import parse_size
from agentenv.swebench import is_instances_file, materialize
from agentenv.verify import AGENT_USER, Check, OutputsCheck, leaf_checks

_SIZE_SCHEMA = {
    "anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "string"}],
    "description": 'Bytes, or a size such as "512m", "2g" or "1.5GiB".',
}

FROM_THE_FOLDER = ("instruction", "folder")
"""Task fields that come from the folder, never from task.toml (``id`` defaults to the
folder's name)."""


class Task(BaseModel):
    """A task as loaded from its folder (``task.toml`` plus the files beside it)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    tags: list[str] = []
    image: str = BASE_IMAGE
    dockerfile: str | None = None  # relative to the task folder; built when the image is absent
    workdir: str = "/workspace"
    limits: Limits = Limits()
    tools: list[str] | None = None  # the built-in tools the agent gets; default: all of them
    setup: str | None = None  # a command run once before the agent (forked groups share it)
    verifier: Check | None = None
    user: str = Field(AGENT_USER, pattern=r"^(root|\d+(:\d+)?)$")  # uid:gid, or "root"
    read_only: bool = True  # the agent's root filesystem; only the workdir and /tmp are writable
    disk: Annotated[int, WithJsonSchema(_SIZE_SCHEMA)] = 2 << 30  # bytes the workdir may hold
    # "prepared": verify in a new sandbox from the prepared state plus the agent's workdir;
    # "final": from an image of the agent's whole final filesystem (trusts what it touched)
    verify_in: Literal["prepared", "final", "agent"] = "prepared"
    # where the agent runs: no network unless the task asks; its CPU and memory
    network: Literal["none", "bridge"] = "none"
    cpus: float = Field(1.0, gt=0, le=64)
    memory: int = 4 << 30
    instruction: str = ""
    folder: Path | None = None

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            tools_named(value)  # raises naming an unknown or repeated one
        return value

    @property
    def agent_tools(self) -> tuple[Tool, ...]:
        """What the agent is shown and may run: the task's ``tools``, else the defaults."""
        return DEFAULT_TOOLS if self.tools is None else tools_named(self.tools)

    @field_validator("disk", mode="before")
    @classmethod
    def _disk(cls, value: int | str) -> int:
        return parse_size(value)

    @model_validator(mode="after")
    def _workdir_absolute(self) -> Task:
        if not self.workdir.startswith("/"):
            raise ValueError(f"workdir must be an absolute path, got {self.workdir!r}")
        return self

    @property
    def workspace(self) -> Path | None:
        """The folder copied into the workdir at the start, if the task has one."""
        path = self.folder / "workspace" if self.folder else None
        return path if path is not None and path.is_dir() else None

    @property
    def tests(self) -> Path | None:
        """The hidden tests, copied in only for the verifier."""
        path = self.folder / "tests" if self.folder else None
        return path if path is not None and path.is_dir() else None

    @property
    def solution(self) -> Path | None:
        """The reference solution script, if the task has one: ``solution.sh``, or
        ``solution/solve.sh`` (the rest of ``solution/`` goes with it, see
        :meth:`solution_files`)."""
        if self.folder is None:
            return None
        for path in (self.folder / "solution.sh", self.folder / "solution" / "solve.sh"):
            if path.is_file():
                return path
        return None

    def solution_files(self) -> dict[str, str]:
        """The other files of the task's ``solution/`` folder (relative path → text), which
        the oracle puts next to the script; raises :class:`TaskError` for one that is not
        text."""
        solution = self.solution
        if solution is None or solution.parent.name != "solution" or solution.parent == self.folder:
            return {}
        files: dict[str, str] = {}
        for path in sorted(solution.parent.rglob("*")):
            if path.is_file() and path != solution:
                try:
                    files[str(path.relative_to(solution.parent))] = path.read_text()
                except UnicodeDecodeError as e:
                    raise TaskError(f"{path}: the oracle takes text files only ({e.reason})") from e
        return files


def load_task(folder: Path | str) -> Task:
    """Load and validate the task in ``folder``: its task.toml (agentenv's format or
    Harbor's), instruction.md, and the files it names (a Dockerfile, each outputs check's
    cases file). Raises :class:`~agentenv.problems.Problems` (a :class:`TaskError`) naming
    every problem found, each with its file and field."""
    folder = Path(folder)
    spec_file = folder / "task.toml"
    if not spec_file.is_file():
        raise Problems([Problem(spec_file, "not found (a task folder needs task.toml)")])
    try:
        raw = tomllib.loads(spec_file.read_text())
    except tomllib.TOMLDecodeError as e:
        raise Problems([from_toml(spec_file, e)]) from e
    except UnicodeDecodeError as e:
        raise Problems([Problem(spec_file, f"not valid TOML: {e}")]) from e
    problems: list[Problem] = []
    harbor = is_harbor(raw, folder)
    if harbor:
        try:
            raw = task_fields(raw, folder, spec_file)  # Harbor's format, run as it is
        except Problems as e:
            problems += e.problems
    for key in FROM_THE_FOLDER:
        if key in raw:
            problems.append(Problem(spec_file, "not a task.toml field", field=key))
    raw.setdefault("id", folder.resolve().name)
    instruction_file = folder / "instruction.md"
    if not instruction_file.is_file():
        problems.append(Problem(instruction_file, "not found (the agent's instruction goes there)"))
    elif not instruction_file.read_text().strip():
        problems.append(Problem(instruction_file, "empty"))
    if problems:
        raise Problems(problems)
    raw["instruction"] = instruction_file.read_text()
    raw["folder"] = folder.resolve()
    try:
        task = Task.model_validate(raw)
    except ValidationError as e:
        rename = HARBOR_FIELDS if harbor else None
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


def load_tasks(paths: list[Path] | list[str]) -> list[Task]:
    """Tasks from each path: a task folder (it has ``task.toml``), a folder of task
    folders such as ``environments/``, or a file of SWE-bench-style instances (``.jsonl`` or
    ``.json``, see :mod:`agentenv.swebench`). Ids must be unique. Raises
    :class:`~agentenv.problems.Problems` naming every problem of every task."""
    tasks: list[Task] = []
    problems: list[Problem] = []
    for path in map(Path, paths):
        try:
            folders = _task_folders(path)
        except TaskError as e:
            problems += e.problems if isinstance(e, Problems) else [Problem(None, str(e))]
            continue
        for folder in folders:
            try:
                tasks.append(load_task(folder))
            except Problems as e:
                problems += e.problems
    seen: dict[str, Path | None] = {}
    for task in tasks:
        if task.id in seen:
            twice = f"task id {task.id!r} is used twice: {seen[task.id]} and {task.folder}"
            problems.append(Problem(None, twice))
        seen[task.id] = task.folder
    if problems:
        raise Problems(problems)
    return tasks


def _task_folders(path: Path) -> list[Path]:
    """The task folders ``path`` stands for (instances are written out as folders)."""
    if (path / "task.toml").is_file():
        return [path]
    if is_instances_file(path):
        return materialize(path)
    if path.is_dir():
        found = sorted(p.parent for p in path.glob("*/task.toml"))
        if not found:
            raise Problems([Problem(path, "no task folders (folders with a task.toml) in it")])
        return found
    raise Problems([Problem(path, "no such task folder or instances file (.jsonl, .json)")])


def task_warnings(task: Task) -> list[str]:
    """What in the task folder will likely make a right answer score 0, for a person to fix:
    a workspace module named like a standard-library one (``calendar.py``) is never what the
    hidden tests import, since the workdir comes last on their ``sys.path``."""
    workspace = task.workspace
    if workspace is None:
        return []
    found: list[str] = []
    for child in sorted(workspace.iterdir()):
        name = child.stem if child.suffix == ".py" and child.is_file() else child.name
        is_module = child.suffix == ".py" or (child / "__init__.py").is_file()
        if is_module and name in sys.stdlib_module_names:
            found.append(
                f"{task.id}: workspace/{child.name} has the name of the standard library's "
                f"{name!r} module: the hidden tests import the standard library's, not this "
                "one (the workspace comes last on their sys.path); rename it"
            )
    return found


def task_digest(task: Task) -> str:
    """A digest of everything in the task's folder: a job refuses to resume when it changed."""
    # fields added since jobs were first written are left out at their default, so that
    # a job started before them still resumes
    fresh = {"tools": None, "network": "none", "cpus": 1.0, "memory": 4 << 30}
    unset = {name for name, default in fresh.items() if getattr(task, name) == default}
    h = hashlib.sha256(task.model_dump_json(exclude={"folder", *unset}).encode())
    if task.folder is not None:
        for path in sorted(task.folder.rglob("*")):
            if path.is_file():
                h.update(str(path.relative_to(task.folder)).encode() + b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


__all__ = ["Task", "TaskError", "load_task", "load_tasks", "task_digest", "task_warnings"]
