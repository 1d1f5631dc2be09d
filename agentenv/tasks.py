"""The task spec: one folder per task (loading it is :mod:`agentenv.formats`).

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
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from agentenv.agent.mcp import McpServer
from agentenv.agent.tools import DEFAULT_TOOLS, Tool, tools_named
from agentenv.agent.trajectory import Limits
from agentenv.errors import TaskError
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.spec import SandboxSpec, parse_size
from agentenv.verify import AGENT_USER, Check
from agentenv.verify.kinds.harbor import HarborArtifact

_SIZE_SCHEMA = {
    "anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "string"}],
    "description": 'Bytes, or a size such as "512m", "2g" or "1.5GiB".',
}

FROM_THE_FOLDER = ("instruction", "folder")
"""Task fields that come from the folder, never from task.toml (``id`` defaults to the
folder's name)."""


class Healthcheck(BaseModel):
    """A command that must pass before the agent gets its sandbox (Harbor's ``[environment]
    healthcheck``, Docker HEALTHCHECK's options): tried every ``interval_s`` (every
    ``start_interval_s`` within the first ``start_period_s``, whose failures do not count)
    until it exits 0; the ``retries``-th failure in a row after the start period fails the
    episode (:mod:`agentenv.runner.healthcheck`)."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1)  # run with ``bash -c`` in the workdir; exit 0 is healthy
    interval_s: float = Field(5.0, ge=0)
    timeout_s: float = Field(30.0, gt=0)  # one try's
    start_period_s: float = Field(0.0, ge=0)
    start_interval_s: float = Field(5.0, ge=0)
    retries: int = Field(3, ge=0)


class TaskStep(BaseModel):
    """One step of a multi-step task (Harbor's ``[[steps]]``): its instruction to the agent
    (a new conversation in the same sandbox), then its checks; ``folder`` is
    ``steps/<name>/`` (``tests/``, ``solution/``, ``workdir/`` with an optional
    ``setup.sh``), run by :mod:`agentenv.runner.steps`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    instruction: str = Field(min_length=1)
    folder: Path
    # the trial stops after this step when its reward (a number: the reward; a table: each
    # named reward) is below, or its verifier failed
    min_reward: float | dict[str, float] | None = None
    wall_time_s: float | None = Field(None, gt=0)  # the agent's, else the task's
    verifier_timeout_s: float | None = Field(None, gt=0)  # test.sh's, else the task's
    verifier_env: dict[str, str] = {}  # on top of the task's verifier env
    # its own separate verifier (Harbor's [steps.verifier.environment], a
    # steps/<name>/tests/Dockerfile): the harbor check's mode, image and environment for
    # it, `own` (its resources replace the task's) and `env` (formats/harbor/verifier.py)
    verifier_environment: dict[str, Any] | None = None
    healthcheck: Healthcheck | None = None  # after its setup, before the agent
    # collected with the task's after the step (Harbor's: appended to them), under the
    # episode's artifacts folder's steps/<name>/
    artifacts: list[HarborArtifact] = []


class MultiStep(BaseModel):
    """A task's steps, run in order over one sandbox, and how the task's reward is made of
    theirs: ``mean`` (of the steps that ran) or ``final`` (the last step run's)."""

    model_config = ConfigDict(extra="forbid")

    steps: list[TaskStep] = Field(min_length=1)
    reward: Literal["mean", "final"] = "mean"


class Task(BaseModel):
    """A task as loaded from its folder (``task.toml`` plus the files beside it)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    tags: list[str] = []
    image: str = BASE_IMAGE
    dockerfile: str | None = None  # relative to the task folder; built when the image is absent
    # seconds that build may take: past them it is stopped, a task error (Harbor's
    # [environment] build_timeout_sec); None: no limit
    build_timeout_s: float | None = Field(None, gt=0)
    # relative to the task folder: a compose file whose services run beside the agent's
    # (Harbor's environment/docker-compose.yaml; agentenv.sandbox.compose)
    compose: str | None = None
    workdir: str = "/workspace"
    limits: Limits = Limits()
    tools: list[str] | None = None  # the built-in tools the agent gets; default: all of them
    # MCP servers among the compose services whose tools the agent gets too, named
    # <server>__<tool> (Harbor's [[environment.mcp_servers]]; agentenv.agent.mcp)
    mcp_servers: list[McpServer] = []
    setup: str | None = None  # a command run once before the agent (forked groups share it)
    verifier: Check | None = None
    # uid:gid, "root", or a user name in the image (resolved to its uid:gid at prepare)
    user: str = Field(AGENT_USER, pattern=r"^(root|\d+(:\d+)?|[A-Za-z_][A-Za-z0-9_.-]*)$")
    read_only: bool = True  # the agent's root filesystem; only the workdir and /tmp are writable
    # start the sandbox as the image starts (its ENTRYPOINT, as its USER; Harbor's tasks)
    image_entrypoint: bool = False
    disk: Annotated[int, WithJsonSchema(_SIZE_SCHEMA)] = 2 << 30  # bytes the workdir may hold
    # "prepared": verify in a new sandbox from the prepared state plus the agent's workdir;
    # "final": from an image of the agent's whole final filesystem (trusts what it touched)
    verify_in: Literal["prepared", "final", "agent"] = "prepared"
    # where the agent runs: no network unless the task asks; its CPU and memory
    network: Literal["none", "bridge", "allowlist"] = "none"
    # with network "allowlist": the hosts (names, *.suffix, IPs, CIDRs) it may reach, through
    # a gateway outside the sandbox (agentenv/sandbox/docker/egress.py; Docker only)
    allowed_hosts: list[str] = []
    cpus: float = Field(1.0, gt=0, le=64)
    memory: int = 4 << 30
    # the environment of the agent's commands (Harbor's [environment.env]); the oracle's
    # reference solution gets ``solution_env`` on top (Harbor's [solution].env)
    env: dict[str, str] = {}
    solution_env: dict[str, str] = {}
    healthcheck: Healthcheck | None = None  # passed before the agent gets the sandbox
    multi_step: MultiStep | None = None  # steps over one sandbox (Harbor's [[steps]])
    # a folder in the sandbox of skills (<name>/SKILL.md) named to the model at episode
    # start (Harbor's [environment] skills_dir; agentenv.agent.skills)
    skills_dir: str | None = Field(None, pattern=r"^/")
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

    @model_validator(mode="after")
    def _mcp_servers_named_once(self) -> Task:
        names = [server.name for server in self.mcp_servers]
        if len(set(names)) != len(names):
            raise ValueError(f"mcp_servers: two servers share a name: {names}")
        return self

    @field_validator("allowed_hosts")
    @classmethod
    def _allowed_hosts(cls, value: list[str]) -> list[str]:
        return list(SandboxSpec(network="allowlist", allowed_hosts=value).allowed_hosts)

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
    """Load and validate the task in ``folder`` (:func:`agentenv.formats.load_task`, where
    the task formats live)."""
    from agentenv.formats import load_task as load

    return load(folder)


def load_tasks(paths: list[Path] | list[str]) -> list[Task]:
    """Tasks from each path (:func:`agentenv.formats.load_tasks`, where the task formats
    live)."""
    from agentenv.formats import load_tasks as load

    return load(paths)


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
    fresh: dict[str, object] = {
        "tools": None,
        "network": "none",
        "allowed_hosts": [],
        "cpus": 1.0,
        "memory": 4 << 30,
        "env": {},
        "solution_env": {},
        "healthcheck": None,
        "image_entrypoint": False,
        "compose": None,
        "multi_step": None,
        "mcp_servers": [],
        "skills_dir": None,
        "build_timeout_s": None,
    }
    unset = {name for name, default in fresh.items() if getattr(task, name) == default}
    h = hashlib.sha256(task.model_dump_json(exclude={"folder", *unset}).encode())
    if task.folder is not None:
        for path in sorted(task.folder.rglob("*")):
            if path.is_file():
                h.update(str(path.relative_to(task.folder)).encode() + b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


__all__ = [
    "Healthcheck",
    "MultiStep",
    "Task",
    "TaskError",
    "TaskStep",
    "load_task",
    "load_tasks",
    "task_digest",
    "task_warnings",
]
