"""Harbor's task format (Terminal-Bench 2.0, and what several RL dataset generators emit),
run as it is: a folder with ``instruction.md``, a ``task.toml`` in Harbor's schema (1.0 to
1.4), ``environment/Dockerfile`` (or ``[environment] docker_image``), ``tests/test.sh`` and
optionally ``solution/solve.sh``.

Every field of task.toml is honoured (:mod:`.fields`) or refused at load naming the file and
the field (:mod:`.refused`; an unknown key too, :mod:`.schema`); ``docs/harbor.md`` has the
table. The semantics kept: the image built from ``environment/`` is the starting state and
the agent works in its ``WORKDIR`` (or ``[environment] workdir``); ``tests/`` reaches
``/tests`` only once the agent is done, and ``test.sh`` runs in the agent's own sandbox; the
reward is ``/logs/verifier/reward.txt`` or ``reward.json``; the timeouts, CPUs, memory and
network of ``task.toml`` hold (internet only where the task asks, off by default here); the
oracle runs ``solution/solve.sh``. Its verification is the ``harbor`` check kind,
:mod:`agentenv.verify.kinds.harbor`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from agentenv.formats.harbor.fields import HARBOR_FIELDS, task_fields
from agentenv.formats.harbor.schema import SCHEMA_VERSIONS
from agentenv.formats.native import load_folder
from agentenv.tasks import Task


def is_harbor(raw: dict[str, Any], folder: Path) -> bool:
    """Whether a task folder is in Harbor's format rather than agentenv's: its task.toml has
    Harbor's version key or its ``[agent]``/``[environment]``/``[metadata]`` tables, or the
    folder an ``environment/`` folder."""
    harbor_keys = ("version", "schema_version", "agent", "environment", "metadata")
    return any(key in raw for key in harbor_keys) or (folder / "environment").is_dir()


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


__all__ = ["HARBOR_FIELDS", "SCHEMA_VERSIONS", "can_load", "is_harbor", "load", "task_fields"]
