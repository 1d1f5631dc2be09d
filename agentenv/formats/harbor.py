"""Harbor's task format (Terminal-Bench 2.0, and what several RL dataset generators emit),
run as it is: a folder with ``instruction.md``, a ``task.toml`` in Harbor's schema (1.0 or
1.1), ``environment/Dockerfile`` (or ``[environment] docker_image``), ``tests/test.sh`` and
optionally ``solution/solve.sh``.

The semantics kept (``docs/harbor.md`` has the whole mapping, and what is not supported):
the image built from ``environment/`` is the starting state and the agent works in its
``WORKDIR`` as the image's user; ``tests/`` reaches ``/tests`` only once the agent is done,
and ``test.sh`` runs in the agent's own sandbox (Harbor's tests inspect system state: a
service, a file in ``/etc``); the reward is ``/logs/verifier/reward.txt`` (a number) or
``reward.json`` (named numbers; ``reward`` if present, else their mean); no reward file is
a reward of 0; the timeouts, CPUs, memory and ``allow_internet`` of ``task.toml`` hold
(internet only where the task asks, off by default here); the oracle runs
``solution/solve.sh``. Its verification is the ``harbor`` check kind,
:mod:`agentenv.verify.kinds.harbor`.
"""

from __future__ import annotations

import math
import re
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv.agent.trajectory import Limits
from agentenv.formats.native import load_folder
from agentenv.problems import Problem, Problems
from agentenv.sandbox.spec import parse_size
from agentenv.tasks import Task

SCHEMA_VERSIONS = ("1.0", "1.1")
_MIB = 1 << 20
_Bad = Callable[[str, str], None]  # records a problem: (field, message)


def is_harbor(raw: dict[str, Any], folder: Path) -> bool:
    """Whether a task folder is in Harbor's format rather than agentenv's: its task.toml has
    Harbor's version key or its ``[agent]``/``[environment]``/``[metadata]`` tables, or the
    folder an ``environment/`` folder."""
    harbor_keys = ("version", "schema_version", "agent", "environment", "metadata")
    return any(key in raw for key in harbor_keys) or (folder / "environment").is_dir()


HARBOR_FIELDS = {
    "cpus": "environment.cpus",
    "memory": "environment.memory_mb",
    "disk": "environment.storage_mb",
    "image": "environment.docker_image",
    "limits.wall_time_s": "agent.timeout_sec",
    "verifier.harbor.timeout_s": "verifier.timeout_sec",
    "verifier.harbor.env": "verifier.env",
}
"""The agentenv task field (dotted) → the Harbor task.toml field it comes from, so that an
error found in the agentenv task names the field the user wrote."""


def task_fields(raw: dict[str, Any], folder: Path, spec_file: Path) -> dict[str, Any]:
    """The fields of an agentenv :class:`~agentenv.tasks.Task` for the Harbor task in
    ``folder`` whose task.toml is ``raw``; raises :class:`~agentenv.problems.Problems`
    naming the file and the field of everything that cannot be run."""
    problems: list[Problem] = []

    def bad(field: str, message: str) -> None:
        problems.append(Problem(spec_file, message, field=field))

    version = str(raw.get("schema_version", raw.get("version", "1.0")))
    if version not in SCHEMA_VERSIONS:
        known = ", ".join(SCHEMA_VERSIONS)
        bad("schema_version", f"{version!r} is not a Harbor schema agentenv runs ({known})")
        raise Problems(problems)  # the rest is read as one of these versions
    env, agent, verifier, metadata, task = (
        _table(raw, key, bad) for key in ("environment", "agent", "verifier", "metadata", "task")
    )
    environment = folder / "environment"
    problems += _unsupported(environment, agent, verifier, bad)
    dockerfile = environment / "Dockerfile"
    image = env.get("docker_image")
    workdir = "/app"
    if image is None and not dockerfile.is_file():
        problems.append(Problem(dockerfile, "not found, and task.toml has no docker_image"))
    elif image is None:
        try:
            workdir = _workdir(dockerfile)
        except Problems as e:
            problems += e.problems
    if not (folder / "tests" / "test.sh").is_file():
        problems.append(Problem(folder / "tests" / "test.sh", "not found (Harbor's verifier)"))
    name = str(task.get("name") or folder.resolve().name).rsplit("/", 1)[-1]
    task_id = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "task"
    internet = env.get("allow_internet", False)
    if not isinstance(internet, bool):
        bad("environment.allow_internet", f"{internet!r} is not true or false")
    verifier_env = verifier.get("env") or {}
    if not isinstance(verifier_env, dict):
        bad("verifier.env", "must be a table of environment variables")
        verifier_env = {}
    tags = [*_strings(metadata, "tags", "metadata", bad), *_strings(task, "keywords", "task", bad)]
    fields: dict[str, Any] = {
        "id": task_id,
        "description": str(task.get("description") or _first_line(folder / "instruction.md")),
        "tags": tags,
        "workdir": workdir,
        "user": "root",
        "read_only": False,
        "verify_in": "agent" if _verifier_mode(verifier, bad) == "shared" else "final",
        "network": "bridge" if internet is True else "none",
        "verifier": {
            "kind": "harbor",
            "name": "tests/test.sh",
            "timeout_s": _number(verifier, "timeout_sec", "verifier", bad) or 600.0,
            "env": {str(k): str(v) for k, v in verifier_env.items()},
            "mode": _verifier_mode(verifier, bad),
            "image": (verifier.get("environment") or {}).get("docker_image"),
            "artifacts": [
                a if isinstance(a, dict) else {"source": a} for a in raw.get("artifacts") or []
            ],
        },
    }
    if metadata.get("category"):
        fields["tags"].append(str(metadata["category"]))
    if image is None:
        fields["dockerfile"] = "environment/Dockerfile"  # built as agentenv/task-<id>:ctx-…
    else:
        fields["image"] = str(image)
    fields.update(_resources(env, bad))
    timeout = _number(agent, "timeout_sec", "agent", bad, zero_is_none=True)
    fields["limits"] = Limits(wall_time_s=timeout)
    if problems:
        raise Problems(problems)
    return fields


def _unsupported(
    environment: Path, agent: dict[str, Any], verifier: dict[str, Any], bad: _Bad
) -> list[Problem]:
    """What of a Harbor task agentenv cannot run yet (each field's problem through ``bad``;
    a compose file's returned)."""
    problems = []
    if (environment / "docker-compose.yaml").is_file() or (
        environment / "docker-compose.yml"
    ).is_file():
        problems.append(
            Problem(
                environment / "docker-compose.yaml",
                "compose-based Harbor tasks (several services) are not supported; a task "
                "with one environment/Dockerfile is",
            )
        )
    if (environment.parent / "tests" / "Dockerfile").is_file():
        bad("verifier", "a verifier image built from tests/Dockerfile is not supported yet")
    for who, table in (("agent", agent), ("verifier", verifier)):
        user = table.get("user")
        if user not in (None, "root", "0", "0:0"):
            bad(f"{who}.user", f"{user!r}: only root is supported yet")
    return problems


def _verifier_mode(verifier: dict[str, Any], bad: _Bad) -> str:
    """The ``harbor`` check's ``mode``: Harbor's ``environment_mode`` when written
    (``separate`` also implied by ``[verifier.environment]``), else agentenv's ``final``:
    Harbor's implicit shared mode is taken only when the task asks for it by name."""
    mode = verifier.get("environment_mode")
    if mode is None:
        return "separate" if isinstance(verifier.get("environment"), dict) else "final"
    if mode not in ("shared", "separate"):
        bad("verifier.environment_mode", f"{mode!r} is not 'shared' or 'separate'")
        return "final"
    if mode == "shared" and "environment" in verifier:
        bad("verifier.environment", "conflicts with environment_mode = 'shared'")
    return str(mode)


def _resources(env: dict[str, Any], bad: _Bad) -> dict[str, Any]:
    """The task's ``cpus``, ``memory`` and ``disk`` from ``[environment]``, those given."""
    fields: dict[str, Any] = {}
    cpus = _number(env, "cpus", "environment", bad)
    if cpus is not None:
        fields["cpus"] = cpus
    sizes = (("memory", "memory_mb", "memory"), ("storage", "storage_mb", "disk"))
    for key, mb_key, field in sizes:
        size = _size(env, key, mb_key, bad)
        if size is not None:
            fields[field] = size
    return fields


def _first_line(instruction: Path) -> str:
    """A schema-1.0 task has no description: its instruction's first line stands in."""
    if not instruction.is_file():
        return ""
    lines = instruction.read_text(errors="replace").splitlines()
    first = next((line.strip("# ").strip() for line in lines if line.strip()), "")
    return first[:200]


def _table(raw: dict[str, Any], key: str, bad: _Bad) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        bad(key, "must be a table")
        return {}
    return value


def _strings(table: dict[str, Any], key: str, where: str, bad: _Bad) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list):
        bad(f"{where}.{key}", f"{value!r} is not a list of strings")
        return []
    return [str(v) for v in value]


def _number(
    table: dict[str, Any], key: str, where: str, bad: _Bad, *, zero_is_none: bool = False
) -> float | None:
    """``table[key]`` as a number above 0 (a number in a string too, as Harbor reads it),
    or None when absent (or 0, with ``zero_is_none``); a problem naming the field else."""
    if key not in table:
        return None
    value = table[key]
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if zero_is_none and number == 0:
        return None
    if not math.isfinite(number) or number <= 0:
        bad(f"{where}.{key}", f"{value!r} is not a number above 0")
        return None
    return number


def _size(env: dict[str, Any], key: str, mb_key: str, bad: _Bad) -> int | None:
    if mb_key in env:
        mib = _number(env, mb_key, "environment", bad)
        return None if mib is None else int(mib * _MIB)
    if key not in env:
        return None
    try:
        return parse_size(str(env[key]))
    except ValueError:
        bad(f"environment.{key}", f"{env[key]!r} is not a size like '4G'")
        return None


def _workdir(dockerfile: Path) -> str:
    """The image's working folder, the last ``WORKDIR`` of its Dockerfile (``/app``, Harbor's
    usual one, without), with ``$NAME``/``${NAME}`` replaced by the Dockerfile's ``ENV`` and
    ``ARG`` values; raises :class:`~agentenv.problems.Problems` for one it cannot know."""
    found, values = "/app", {}
    lines = dockerfile.read_text(errors="replace").splitlines()
    for number, line in enumerate(lines, 1):
        parts = line.strip().split(None, 1)
        if len(parts) != 2:
            continue
        word, rest = parts[0].upper(), parts[1].strip()
        if word in ("ENV", "ARG"):
            values.update(_assignments(rest, legacy=word == "ENV"))
        elif word == "WORKDIR":
            path = _expand(rest.strip("\"'"), values, dockerfile, number)
            found = path if path.startswith("/") else f"{found.rstrip('/')}/{path}"
    return found if found.rstrip("/") else "/app"


def _assignments(rest: str, *, legacy: bool) -> dict[str, str]:
    """``ENV a=1 b="2"`` / ``ARG a=1`` (an ARG without a default gives nothing), and the
    legacy ``ENV a 1``."""
    try:
        words = shlex.split(rest)
    except ValueError:
        return {}
    if legacy and words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words if "=" in w)


def _expand(path: str, values: dict[str, str], dockerfile: Path, line: int) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            why = f"WORKDIR uses ${name}, which no ENV or ARG before it sets"
            raise Problems([Problem(dockerfile, why, line=line)])
        return values[name]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", value, path)


def can_load(path: Path) -> bool:
    """Whether ``path`` is a task folder in Harbor's format (see :func:`is_harbor`)."""
    spec_file = path / "task.toml"
    if not spec_file.is_file():
        return False
    try:
        raw = tomllib.loads(spec_file.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False  # agentenv's loader names what is wrong with it
    return is_harbor(raw, path)


def load(path: Path) -> list[Task]:
    """The Harbor task in the folder ``path``, as agentenv runs it."""
    return [load_folder(path, fields=task_fields, rename=HARBOR_FIELDS)]
