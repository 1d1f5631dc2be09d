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

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

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
    :class:`~agentenv.problems.Problems` naming every problem of every task (what
    ``agentenv validate`` prints; :func:`load_runnable` keeps the tasks that load)."""
    loaded = load_runnable(paths)
    if loaded.refused:
        raise Problems([p for refused in loaded.refused for p in refused.problems])
    return loaded.tasks


@dataclass(frozen=True)
class RefusedTask:
    """A task folder that did not load: a row of a job, never an episode. A job records it
    with its reason (outcome ``refused``) and runs the other tasks."""

    id: str  # the folder's name: a task that does not load has no other id to trust
    folder: Path
    problems: tuple[Problem, ...]
    digest: str  # of the folder's files: a job sees it changed once it is fixed

    @property
    def reason(self) -> str:
        """Every problem, one per line, each naming its file and field."""
        return "\n".join(map(str, self.problems))


class Loaded(NamedTuple):
    """What :func:`load_runnable` found: the tasks that load, and the folders that did not."""

    tasks: list[Task]
    refused: list[RefusedTask]


def load_runnable(paths: list[Path] | list[str]) -> Loaded:
    """As :func:`load_tasks`, but a task folder that does not load is a
    :class:`RefusedTask` beside the tasks that do, not a reason to load nothing. What is
    not one task's problem still raises :class:`~agentenv.problems.Problems`: a path that
    is not there or holds no task, an instances file that does not parse, an id used
    twice."""
    tasks: list[Task] = []
    refused: list[RefusedTask] = []
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
        tasks += found.tasks
        refused += found.refused
    seen: dict[str, Path | None] = {}
    for task_id, folder in [(t.id, t.folder) for t in tasks] + [(r.id, r.folder) for r in refused]:
        if task_id in seen:
            twice = f"task id {task_id!r} is used twice: {seen[task_id]} and {folder}"
            problems.append(Problem(None, twice))
        seen[task_id] = folder
    if problems:
        raise Problems(problems)
    return Loaded(tasks, refused)


def _tasks_at(path: Path) -> Loaded:
    """The tasks ``path`` holds, and its task folders that would not load: the format
    that can load it, else each task folder in it."""
    if any(fmt.can_load(path) for fmt in FOLDER_FORMATS):
        folders = [path]
    else:
        for fmt in FORMATS:
            if fmt.can_load(path):
                return Loaded(fmt.load(path), [])
        if not path.is_dir():
            raise Problems([Problem(path, "no such task folder or instances file (.jsonl, .json)")])
        folders = sorted(p.parent for p in path.glob("*/task.toml"))
        if not folders:
            raise Problems([Problem(path, "no task folders (folders with a task.toml) in it")])
    loaded = Loaded([], [])
    for folder in folders:
        try:
            loaded.tasks.append(load_task(folder))
        except TaskError as e:
            found = e.problems if isinstance(e, Problems) else [Problem(folder, str(e))]
            loaded.refused.append(
                RefusedTask(folder.name, folder, tuple(found), folder_digest(folder))
            )
    return loaded


def folder_digest(folder: Path) -> str:
    """A digest of every file in ``folder`` (names and contents)."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


__all__ = [
    "FOLDER_FORMATS",
    "FORMATS",
    "Loaded",
    "RefusedTask",
    "TaskFormat",
    "folder_digest",
    "load_runnable",
    "load_task",
    "load_tasks",
]
