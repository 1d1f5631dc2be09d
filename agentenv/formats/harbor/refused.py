"""What of Harbor's task format agentenv does not run, refused at load with a message
naming the file and the field: one function per feature, so that lifting a refusal is
deleting its call in :func:`refusals` once the feature is built.

Two kinds: *not yet* (a subsystem agentenv lacks today; other modules refuse those
where they map the field, e.g. a network allowlist in fields.py) and *never here*
(hardware or an OS these sandboxes cannot give: a GPU, a TPU, Windows containers), which
say why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv.problems import Problem

Bad = Callable[[str, str], None]
"""Records a problem of task.toml: (field, message)."""

NOT_YET = "is not supported by agentenv yet"


def refusals(raw: dict[str, Any], folder: Path, bad: Bad) -> list[Problem]:
    """Every feature of the Harbor task ``raw`` (its task.toml) in ``folder`` that agentenv
    cannot run: a field's through ``bad``, a file's returned."""
    hardware(_table(raw, "environment"), bad)
    return []


def hardware(env: dict[str, Any], bad: Bad) -> None:
    """What these sandboxes can never give: refused for good, saying why."""
    gpus = env.get("gpus")
    if gpus not in (None, 0) or env.get("gpu_types"):
        field = "environment.gpus" if gpus not in (None, 0) else "environment.gpu_types"
        bad(field, f"{gpus!r}: agentenv's sandboxes have no GPUs (containers on CPU hosts)")
    if env.get("tpu") is not None:
        bad("environment.tpu", "agentenv's sandboxes have no TPUs (containers on CPU hosts)")
    os_name = env.get("os", "linux")
    if str(os_name).lower() != "linux":
        bad("environment.os", f"{os_name!r}: agentenv runs Linux containers only")


def _table(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, dict) else {}
