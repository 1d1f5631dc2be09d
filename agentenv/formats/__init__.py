"""How a folder or a file becomes tasks: one module per task format, each saying whether
it can load a path (``can_load``) and loading it (``load``):

- :mod:`~agentenv.formats.native`: agentenv's task folder (``task.toml``, ``instruction.md``);
- :mod:`~agentenv.formats.harbor`: a task folder in Harbor's format, run as it is;
- :mod:`~agentenv.formats.swebench`: a file of SWE-bench-style instances.

:func:`load_task` and :func:`load_tasks` ask each in turn, so adding a format is adding a
module and naming it in :data:`FORMATS`. The JSON Schemas of the files a user writes or
reads are generated into ``schemas/`` beside them (:mod:`agentenv.schemas`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from agentenv.errors import TaskError
from agentenv.formats import harbor, native, swebench
from agentenv.problems import Problem, Problems
from agentenv.tasks import Task


class TaskFormat(Protocol):
    """A task format: whether a path is in it, and the tasks it holds."""

    def can_load(self, path: Path) -> bool:
        """Whether ``path`` is in this format."""
        ...

    def load(self, path: Path) -> list[Task]:
        """The tasks at ``path``; raises :class:`~agentenv.problems.Problems` naming every
        problem found."""
        ...


FOLDER_FORMATS: tuple[TaskFormat, ...] = (harbor, native)
"""The formats of one task folder, the first that can load it wins (Harbor's task.toml is
told apart by its keys; agentenv's is the rest)."""
FORMATS: tuple[TaskFormat, ...] = (swebench, *FOLDER_FORMATS)
"""Every format a path given to :func:`load_tasks` may be in."""


def load_task(folder: Path | str) -> Task:
    """Load and validate the task in ``folder``: its task.toml (agentenv's format or
    Harbor's), instruction.md, and the files it names (a Dockerfile, each outputs check's
    cases file). Raises :class:`~agentenv.problems.Problems` (a :class:`TaskError`) naming
    every problem found, each with its file and field."""
    folder = Path(folder)
    for fmt in FOLDER_FORMATS:
        if fmt.can_load(folder):
            (task,) = fmt.load(folder)
            return task
    raise Problems([Problem(folder / "task.toml", "not found (a task folder needs task.toml)")])


def load_tasks(paths: list[Path] | list[str]) -> list[Task]:
    """Tasks from each path: a task folder (it has ``task.toml``), a folder of task
    folders such as ``environments/``, or a file of SWE-bench-style instances (``.jsonl`` or
    ``.json``, see :mod:`agentenv.formats.swebench`). Ids must be unique. Raises
    :class:`~agentenv.problems.Problems` naming every problem of every task."""
    tasks: list[Task] = []
    problems: list[Problem] = []
    for path in map(Path, paths):
        try:
            found = _tasks_at(path)
        except Problems as e:
            problems += e.problems
            continue
        except TaskError as e:
            problems.append(Problem(None, str(e)))
            continue
        tasks += found[0]
        problems += found[1]
    seen: dict[str, Path | None] = {}
    for task in tasks:
        if task.id in seen:
            twice = f"task id {task.id!r} is used twice: {seen[task.id]} and {task.folder}"
            problems.append(Problem(None, twice))
        seen[task.id] = task.folder
    if problems:
        raise Problems(problems)
    return tasks


def _tasks_at(path: Path) -> tuple[list[Task], list[Problem]]:
    """The tasks ``path`` holds, and the problems of those that would not load: the format
    that can load it, else each task folder in it."""
    for fmt in FORMATS:
        if fmt.can_load(path):
            return fmt.load(path), []
    if not path.is_dir():
        raise Problems([Problem(path, "no such task folder or instances file (.jsonl, .json)")])
    folders = sorted(p.parent for p in path.glob("*/task.toml"))
    if not folders:
        raise Problems([Problem(path, "no task folders (folders with a task.toml) in it")])
    tasks: list[Task] = []
    problems: list[Problem] = []
    for folder in folders:
        try:
            tasks.append(load_task(folder))
        except Problems as e:
            problems += e.problems
    return tasks, problems


__all__ = ["FOLDER_FORMATS", "FORMATS", "TaskFormat", "load_task", "load_tasks"]
