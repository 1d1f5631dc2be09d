"""The keys of Harbor's task.toml, schema 1.0 to 1.4, as Harbor 0.25's own models
(``harbor.models.task.config``) define them, table by table; and the check that a task.toml
uses no other.

Harbor's models ignore a key they do not know (pydantic's default), so a misspelt
``timeout_secs`` there runs the task with the default timeout without a word. agentenv
refuses an unknown key instead, naming it and the nearest known one: a typo must not change
what a task asks. The exceptions are the descriptive tables: ``[metadata]``, which Harbor
declares as a free table (``dict[str, Any]``), and ``[task]``, where task sets add keys
of their own (``format``, ``workstream``): any key is kept there; neither changes a run.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")
"""The Harbor task.toml schema versions agentenv reads (``schema_version``, or ``version``
in the older spelling). Their tables differ only by keys added: a newer key in an older
version is read the same, as Harbor does."""

_NETWORK = ("network_mode", "allowed_hosts")
_HEALTHCHECK = (
    "command",
    "interval_sec",
    "timeout_sec",
    "start_period_sec",
    "start_interval_sec",
    "retries",
)
_ENVIRONMENT = (
    "build_timeout_sec",
    "docker_image",
    "os",
    "cpus",
    "memory_mb",
    "storage_mb",
    "gpus",
    "gpu_types",
    "tpu",
    "mcp_servers",
    "env",
    "skills_dir",
    "healthcheck",
    "workdir",
    "allow_internet",
    "memory",  # deprecated spellings Harbor still reads
    "storage",
    *_NETWORK,
)
_VERIFIER = ("timeout_sec", "env", "user", "environment_mode", "environment", "collect", *_NETWORK)
_AGENT = ("timeout_sec", "user", *_NETWORK)
_ARTIFACT = ("source", "destination", "exclude", "service")

TABLES: dict[str, tuple[str, ...]] = {
    "": (
        "schema_version",
        "version",
        "task",
        "metadata",
        "verifier",
        "agent",
        "environment",
        "solution",
        "source",
        "multi_step_reward_strategy",
        "steps",
        "artifacts",
    ),
    "task": ("name", "version", "description", "authors", "keywords"),
    "task.authors": ("name", "email"),
    "agent": _AGENT,
    "verifier": _VERIFIER,
    "verifier.collect": ("command", "service", "timeout_sec", "user"),
    "verifier.environment": _ENVIRONMENT,
    "environment": _ENVIRONMENT,
    "environment.healthcheck": _HEALTHCHECK,
    "environment.tpu": ("type", "topology"),
    "environment.mcp_servers": ("name", "transport", "url", "command", "args", "headers"),
    "solution": ("env",),
    "artifacts": _ARTIFACT,
    "steps": ("name", "agent", "verifier", "min_reward", "healthcheck", "artifacts"),
}
"""Each table of Harbor's task.toml (dotted; ``""`` is the top level; an array of tables
is named once for all its entries) → the keys Harbor's models define in it. Tables whose
values are free (``metadata``, every ``env``) are not listed."""

# [task] is descriptive too: task sets add keys of their own there (`format`,
# `workstream`) that Harbor's model drops and that change nothing about how a task runs
_FREE = ("metadata", "task", "environment.env", "verifier.env", "solution.env")
_NESTED = {  # a table read with another's keys
    "verifier.environment": "environment",
    "steps.agent": "agent",
    "steps.verifier": "verifier",
    "steps.healthcheck": "environment.healthcheck",
    "steps.artifacts": "artifacts",
}


def unknown_keys(raw: dict[str, Any], bad: Callable[[str, str], None]) -> None:
    """Report through ``bad`` (field, message) every key of ``raw`` that Harbor's schema
    does not define where it is written, with the known key it most likely meant."""
    _walk(raw, "", "", bad)


def _walk(table: dict[str, Any], name: str, where: str, bad: Callable[[str, str], None]) -> None:
    known = TABLES.get(name)
    if known is None:
        return
    for key, value in table.items():
        field = f"{where}.{key}" if where else key
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            table_name = f"[{where}]" if where else "the top level"
            bad(field, f"not a key Harbor's task.toml has in {table_name}{hint}")
            continue
        inner = f"{name}.{key}" if name else key
        inner = _NESTED.get(inner, inner)
        if inner in _FREE:
            continue
        entries = value if isinstance(value, list) else [value]
        for index, entry in enumerate(entries):
            if isinstance(entry, dict):
                at = f"{field}[{index}]" if isinstance(value, list) else field
                _walk(entry, inner, at, bad)
