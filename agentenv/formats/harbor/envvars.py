"""Harbor's ``${VAR}`` / ``${VAR:-default}`` values in the ``env`` tables of task.toml
(``[environment.env]``, ``[verifier.env]``, ``[solution].env``), resolved from the host's
environment as Harbor resolves them (``harbor.utils.env.resolve_env_vars``): a value that is
one whole template is replaced (the host's value, else the default); any other value, one
with a template inside it included, is taken as it is written. A template whose variable the
host does not set and that has no default is refused, naming the variable."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")  # Harbor's: the whole value, or nothing


def resolve(
    table: Any,
    field: str,
    bad: Callable[[str, str], None],
    host: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables of the ``env`` table ``table`` (at ``field``), resolved from ``host``
    (the process's environment by default); each problem through ``bad`` (field, message)."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        bad(field, "must be a table of environment variables")
        return {}
    host = os.environ if host is None else host
    resolved: dict[str, str] = {}
    for key, value in table.items():
        if not _NAME.fullmatch(str(key)):  # it is passed as NAME=value to commands
            bad(f"{field}.{key}", f"{key!r} is not an environment variable's name")
            continue
        if not isinstance(value, str):  # Harbor's models take strings only here too
            bad(f"{field}.{key}", f"{value!r} is not a string")
            continue
        text = value
        match = _TEMPLATE.fullmatch(text)
        if match is None:
            resolved[str(key)] = text
            continue
        name, default = match.group(1), match.group(2)
        if name in host:
            resolved[str(key)] = host[name]
        elif default is not None:
            resolved[str(key)] = default
        else:
            bad(
                f"{field}.{key}",
                f"{text} needs the host's environment variable {name}, which is not set "
                "(set it, or give a default: ${" + name + ":-value})",
            )
    return resolved
