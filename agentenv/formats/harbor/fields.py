"""A Harbor task.toml (schema 1.0 to 1.4) → the fields of an agentenv
:class:`~agentenv.tasks.Task`: each Harbor field honoured here, or refused
(:mod:`.refused`), or an unknown key refused (:mod:`.schema`); ``docs/harbor.md`` has the
table."""

from __future__ import annotations

import math
import posixpath
import re
from pathlib import Path
from typing import Any

from agentenv.agent.trajectory import Limits
from agentenv.formats.harbor import dockerfile as dockerfiles
from agentenv.formats.harbor.compose import compose_fields
from agentenv.formats.harbor.envvars import resolve
from agentenv.formats.harbor.mcp import mcp_fields
from agentenv.formats.harbor.network import fetches, network_fields
from agentenv.formats.harbor.refused import Bad, refusals
from agentenv.formats.harbor.schema import SCHEMA_VERSIONS, unknown_keys
from agentenv.formats.harbor.steps import has_steps, step_fields
from agentenv.formats.harbor.verifier import verifier_fields
from agentenv.problems import Problem, Problems
from agentenv.sandbox.spec import parse_size

_MIB = 1 << 20

HARBOR_FIELDS = {
    "cpus": "environment.cpus",
    "memory": "environment.memory_mb",
    "disk": "environment.storage_mb",
    "image": "environment.docker_image",
    "workdir": "environment.workdir",
    "user": "agent.user",
    "limits.wall_time_s": "agent.timeout_sec",
    "verifier.harbor.timeout_s": "verifier.timeout_sec",
    "verifier.harbor.env": "verifier.env",
    "verifier.harbor.image": "verifier.environment.docker_image",
    "verifier.harbor.artifacts": "artifacts",
    "env": "environment.env",
    "solution_env": "solution.env",
    "healthcheck": "environment.healthcheck",
    "skills_dir": "environment.skills_dir",
    "build_timeout_s": "environment.build_timeout_sec",
}
"""The agentenv task field (dotted) → the Harbor task.toml field it comes from, so that an
error found in the agentenv task names the field the user wrote."""


def task_fields(raw: dict[str, Any], folder: Path, spec_file: Path) -> dict[str, Any]:
    """The fields of an agentenv :class:`~agentenv.tasks.Task` for the Harbor task in
    ``folder`` whose task.toml is ``raw``; raises :class:`~agentenv.problems.Problems`
    naming the file and the field of everything that cannot be run as Harbor would."""
    problems: list[Problem] = []

    def bad(field: str, message: str) -> None:
        problems.append(Problem(spec_file, message, field=field))

    version = str(raw.get("schema_version", raw.get("version", "1.0")))
    if version not in SCHEMA_VERSIONS:
        known = ", ".join(SCHEMA_VERSIONS)
        bad("schema_version", f"{version!r} is not a Harbor schema agentenv runs ({known})")
        raise Problems(problems)  # the rest is read as one of these versions
    tables = ("environment", "agent", "verifier", "metadata", "task", "solution")
    env, agent, verifier, metadata, task, solution = (_table(raw, key, bad) for key in tables)
    unknown_keys(raw, bad)
    problems += refusals(raw, folder, bad)
    checked = verifier_fields(raw, folder, bad)  # where test.sh runs: mode, image, artifacts
    compose = compose_fields(folder, problems)  # services beside main (.compose)
    image, workdir = env.get("docker_image"), _workdir(env, folder, problems, bad)
    steps = step_fields(raw, folder, bad, problems, lambda t, w: _healthcheck(t, bad, w))
    bundled = checked.get("environment", {}).get("bundled", False)  # the image's /tests
    if not (folder / "tests" / "test.sh").is_file() and not has_steps(raw) and not bundled:
        problems.append(Problem(folder / "tests" / "test.sh", "not found (Harbor's verifier)"))
    name = str(task.get("name") or folder.resolve().name).rsplit("/", 1)[-1]
    tags = [*_strings(metadata, "tags", "metadata", bad), *_strings(task, "keywords", "task", bad)]
    if metadata.get("category"):
        tags.append(str(metadata["category"]))
    task_env = resolve(env.get("env"), "environment.env", bad)  # Harbor's: every command's
    scripts = [folder / "tests" / "test.sh", *folder.glob("steps/*/tests/test.sh")]
    network, verifier_network = network_fields(
        env,
        agent,
        verifier,
        mode=checked["mode"],
        compose=bool(compose),
        downloads=any(fetches(s) for s in scripts),
        bad=bad,
    )
    fields: dict[str, Any] = {
        "id": re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._") or "task",
        "description": str(task.get("description") or _first_line(folder / "instruction.md")),
        "tags": tags,
        "workdir": workdir,
        "user": _user(agent, "agent", bad),
        "image_entrypoint": True,  # its ENTRYPOINT runs, as in Harbor (docs/harbor.md)
        "read_only": False,
        "verify_in": "agent" if checked["mode"] == "shared" else "final",
        "verifier": {
            "kind": "harbor",
            "name": "tests/test.sh",
            "timeout_s": _number(verifier, "timeout_sec", "verifier", bad) or 600.0,
            "env": _verifier_env(task_env, verifier, bad),
            **checked,
            **verifier_network,
        },
        **network,
        "limits": Limits(
            wall_time_s=_number(agent, "timeout_sec", "agent", bad, zero_is_none=True)
        ),
        "env": task_env,
        "solution_env": resolve(solution.get("env"), "solution.env", bad),
        "healthcheck": _healthcheck(env, bad),
        "multi_step": steps,
        "skills_dir": _skills_dir(env, workdir, bad),
        "build_timeout_s": _number(env, "build_timeout_sec", "environment", bad),
    }
    if verifier.get("user") is not None:  # test.sh's user; else the image's, as Harbor
        _user(verifier, "verifier", bad)  # a name or a uid, checked
        fields["verifier"]["user"] = str(verifier["user"])
    if image is None:
        fields["dockerfile"] = "environment/Dockerfile"  # built as agentenv/task-<id>:ctx-…
    else:
        fields["image"] = str(image)
    fields.update(_resources(env, bad))
    fields.update(compose)
    fields.update(mcp_fields(env, folder, bad))  # servers among the compose services
    if problems:
        raise Problems(problems)
    return fields


def _workdir(env: dict[str, Any], folder: Path, problems: list[Problem], bad: Bad) -> str:
    """``[environment] workdir`` when given (Harbor: it overrides the image's WORKDIR), else
    the Dockerfile's last ``WORKDIR`` (``/app``, Harbor's usual one, without one)."""
    dockerfile = folder / "environment" / "Dockerfile"
    if env.get("docker_image") is None and not dockerfile.is_file():
        problems.append(Problem(dockerfile, "not found, and task.toml has no docker_image"))
    given = env.get("workdir")
    if given is not None:
        if not isinstance(given, str) or not given.startswith("/"):
            bad("environment.workdir", f"{given!r} is not an absolute path")
        return str(given)
    if env.get("docker_image") is not None or not dockerfile.is_file():
        return "/app"
    try:
        return dockerfiles.workdir(dockerfile)
    except Problems as e:
        problems.extend(e.problems)
        return "/app"


def _skills_dir(env: dict[str, Any], workdir: str, bad: Bad) -> str | None:
    """[environment] skills_dir as an absolute path in the sandbox (a relative one is from
    the workdir, where Harbor's agents run their commands); named to the model at start."""
    given = env.get("skills_dir")
    if given in (None, ""):
        return None
    if not isinstance(given, str):
        bad("environment.skills_dir", f"{given!r} is not a path")
        return None
    return posixpath.normpath(posixpath.join(workdir, given))


def _user(table: dict[str, Any], where: str, bad: Bad) -> str:
    """``[agent] user`` / ``[verifier] user`` as agentenv's: root (Harbor's default, the
    image's root user), a uid, or a user name (looked up in the image when the task is
    prepared: one the image lacks is refused then, naming the field)."""
    user = table.get("user")
    if user is None or user in ("root", 0, "0", "0:0"):
        return "root"
    if isinstance(user, int) and not isinstance(user, bool) and user > 0:
        return str(user)
    if isinstance(user, str) and re.fullmatch(r"\d+(:\d+)?|[A-Za-z_][A-Za-z0-9_.-]*", user):
        return user
    bad(f"{where}.user", f"{user!r} is not a user name or a uid (as 1000 or '1000:1000')")
    return "root"


def _verifier_env(task_env: dict[str, str], verifier: dict[str, Any], bad: Bad) -> dict[str, str]:
    """test.sh's environment as Harbor's: ``[verifier.env]`` over the task's
    ``[environment.env]`` (every command in the task's environment gets it), except in a
    verifier environment of its own, whose ``[verifier.environment.env]`` it gets instead."""
    own = resolve(verifier.get("env"), "verifier.env", bad)
    table = verifier.get("environment")
    if not isinstance(table, dict):
        return {**task_env, **own}
    return {**resolve(table.get("env"), "verifier.environment.env", bad), **own}


_HEALTHCHECK = {  # Harbor's key → the Healthcheck field
    "interval_sec": "interval_s",
    "timeout_sec": "timeout_s",
    "start_period_sec": "start_period_s",
    "start_interval_sec": "start_interval_s",
}


def _healthcheck(
    env: dict[str, Any], bad: Bad, where: str = "environment"
) -> dict[str, Any] | None:
    """``[environment] healthcheck`` (or a step's, ``where`` says) as a
    :class:`~agentenv.tasks.Healthcheck`'s fields."""
    table = env.get("healthcheck")
    if table is None:
        return None
    if not isinstance(table, dict) or not isinstance(table.get("command"), str):
        bad(f"{where}.healthcheck", "must be a table with a command (a string)")
        return None
    fields: dict[str, Any] = {"command": table["command"]}
    for key, field in _HEALTHCHECK.items():
        value = table.get(key)
        if value is None:
            continue
        least = 0.0 if key != "timeout_sec" else math.ulp(0.0)  # no pause is fine, no time not
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= least:
            bad(f"{where}.healthcheck.{key}", f"{value!r} is not a number of seconds")
        else:
            fields[field] = float(value)
    retries = table.get("retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        bad(f"{where}.healthcheck.retries", f"{retries!r} is not a whole number >= 0")
    else:
        fields["retries"] = retries
    return fields


def _resources(env: dict[str, Any], bad: Bad) -> dict[str, Any]:
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


def _table(raw: dict[str, Any], key: str, bad: Bad) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        bad(key, "must be a table")
        return {}
    return value


def _strings(table: dict[str, Any], key: str, where: str, bad: Bad) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list):
        bad(f"{where}.{key}", f"{value!r} is not a list of strings")
        return []
    return [str(v) for v in value]


def _number(
    table: dict[str, Any], key: str, where: str, bad: Bad, *, zero_is_none: bool = False
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


def _size(env: dict[str, Any], key: str, mb_key: str, bad: Bad) -> int | None:
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
