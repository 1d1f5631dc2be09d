"""Harbor's multi-step tasks (schema 1.1+): ``[[steps]]`` in task.toml, each a folder
``steps/<name>/`` with ``instruction.md``, ``tests/`` (merged over the task's ``tests/``;
its ``test.sh``, else the task's), ``solution/`` and an optional ``workdir/`` (uploaded to
the workdir before the step, its ``setup.sh`` run then); ``min_reward`` gates and
``multi_step_reward_strategy`` (``mean``, Harbor's default, or ``final``). Loaded here as
the task's :class:`~agentenv.tasks.MultiStep`; run by :mod:`agentenv.runner.steps`.

Of a step's own tables, agentenv runs ``[steps.agent] timeout_sec``, ``[steps.verifier]
timeout_sec``, ``env``, ``environment_mode`` and ``[steps.verifier.environment]`` (a step's
own separate verifier, :func:`~agentenv.formats.harbor.verifier.step_verifier`), and
``[steps.healthcheck]``; the rest (a step's user, network) is refused naming the field. A
step's ``artifacts`` are read as the task's and collected after the step with the task's
(Harbor appends them), under the episode's artifacts folder's ``steps/<name>/``."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from agentenv.formats.harbor.refused import NOT_YET, Bad
from agentenv.formats.harbor.verifier import _artifact as artifact  # the task's reading
from agentenv.formats.harbor.verifier import step_verifier, task_mode
from agentenv.problems import Problem

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_RUN = {
    "agent": ("timeout_sec",),
    "verifier": ("timeout_sec", "env", "environment_mode", "environment"),
}
STRATEGIES = ("mean", "final")


def has_steps(raw: dict[str, Any]) -> bool:
    """Whether task.toml declares a non-empty ``[[steps]]`` (Harbor's test of a multi-step
    task: then the task's own instruction.md and tests/test.sh are not needed)."""
    return isinstance(raw.get("steps"), list) and bool(raw["steps"])


def step_fields(
    raw: dict[str, Any],
    folder: Path,
    bad: Bad,
    problems: list[Problem],
    healthcheck: Any,
) -> dict[str, Any] | None:
    """The task's ``multi_step`` field (``None`` for a single-step task); each problem
    through ``bad`` (a field) or into ``problems`` (a file). ``healthcheck(table, where)``
    reads a healthcheck table as the task's is read."""
    strategy = raw.get("multi_step_reward_strategy")
    if strategy is not None and strategy not in STRATEGIES:
        bad("multi_step_reward_strategy", f"{strategy!r} is not one of {', '.join(STRATEGIES)}")
    given = raw.get("steps")
    if given is None or given == []:
        if (folder / "steps").is_dir():
            why = "a steps/ folder, but task.toml has no [[steps]] naming them"
            problems.append(Problem(folder / "steps", why))
        return None
    if not isinstance(given, list):
        bad("steps", "must be an array of tables ([[steps]])")
        return None
    steps, seen = [], set()
    for i, table in enumerate(given):
        if not isinstance(table, dict):
            bad(f"steps[{i}]", "must be a table")
            continue
        step = _step(table, i, folder, bad, problems, healthcheck, task_mode(raw))
        if step is None:
            continue
        if step["name"].casefold() in seen:
            bad(f"steps[{i}].name", f"{step['name']!r} is the name of an earlier step")
        seen.add(step["name"].casefold())
        steps.append(step)
    return {"steps": steps, "reward": strategy or "mean"}


def _step(
    table: dict[str, Any],
    i: int,
    folder: Path,
    bad: Bad,
    problems: list[Problem],
    healthcheck: Any,
    mode: str,
) -> dict[str, Any] | None:
    where = f"steps[{i}]"
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        bad(f"{where}.name", f"{name!r} is not a folder name under steps/")
        return None
    _refuse_unrun(table, where, bad)
    home = folder / "steps" / name
    verifier = _sub(table, "verifier", where, bad)
    own = step_verifier(verifier, home.resolve(), mode, where, bad)
    instruction = home / "instruction.md"
    text = instruction.read_text(errors="replace") if instruction.is_file() else ""
    if not text.strip():
        problems.append(Problem(instruction, "not found or empty (the step's instruction)"))
    bundled = own is not None and own["environment"].get("bundled", False)  # the image's
    if not any((f / "tests" / "test.sh").is_file() for f in (home, folder)) and not bundled:
        why = "not found, nor the task's tests/test.sh (the step's verifier)"
        problems.append(Problem(home / "tests" / "test.sh", why))
    agent = _sub(table, "agent", where, bad)
    env = verifier.get("env", {})
    if not isinstance(env, dict):
        bad(f"{where}.verifier.env", "must be a table of strings")
        env = {}
    step: dict[str, Any] = {
        "name": name,
        "instruction": text or "-",
        "folder": home.resolve(),
        "min_reward": _gate(table.get("min_reward"), where, bad),
        "wall_time_s": _seconds(agent, f"{where}.agent", bad),
        "verifier_timeout_s": _seconds(verifier, f"{where}.verifier", bad),
        "verifier_env": {str(k): str(v) for k, v in env.items()},
    }
    if own is not None:
        step["verifier_environment"] = own
    if "healthcheck" in table:
        step["healthcheck"] = healthcheck({"healthcheck": table["healthcheck"]}, where)
    step["artifacts"] = _artifacts(table.get("artifacts") or [], where, bad)
    return step


def _artifacts(given: Any, where: str, bad: Bad) -> list[dict[str, Any]]:
    """A step's ``artifacts``, read as the task's are (each problem named under the step)."""
    if not isinstance(given, list):
        bad(f"{where}.artifacts", f"{given!r} is not a list")
        return []

    def mine(field: str, why: str) -> None:
        bad(f"{where}.{field}", why)

    return [artifact(entry, i, mine) for i, entry in enumerate(given)]


def _refuse_unrun(table: dict[str, Any], where: str, bad: Bad) -> None:
    """A step's fields agentenv does not run yet, each named."""
    for section, runs in _RUN.items():
        sub = table.get(section)
        for key in sub if isinstance(sub, dict) else ():
            if key not in runs:
                bad(f"{where}.{section}.{key}", f"a step's own {section} {key} {NOT_YET}")


def _sub(table: dict[str, Any], key: str, where: str, bad: Bad) -> dict[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        bad(f"{where}.{key}", "must be a table")
        return {}
    return value


def _gate(value: Any, where: str, bad: Bad) -> float | dict[str, float] | None:
    """``min_reward``: a number (gates the reward) or a table of named rewards' minimums."""
    if value is None:
        return None
    if isinstance(value, dict) and all(_is_number(v) for v in value.values()):
        return {str(k): float(v) for k, v in value.items()}
    if _is_number(value):
        return float(value)
    bad(f"{where}.min_reward", f"{value!r} is not a number or a table of numbers")
    return None


def _seconds(table: dict[str, Any], where: str, bad: Bad) -> float | None:
    value = table.get("timeout_sec")
    if value is None:
        return None
    if not _is_number(value) or not float(value) > 0:
        bad(f"{where}.timeout_sec", f"{value!r} is not a number above 0")
        return None
    return float(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


__all__ = ["STRATEGIES", "has_steps", "step_fields"]
