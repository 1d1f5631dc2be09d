"""The working folder a Harbor task's Dockerfile leaves: its last ``WORKDIR``, with the
``ENV``/``ARG`` values it uses (``[environment] workdir`` in task.toml overrides it)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from agentenv.problems import Problem, Problems


def workdir(dockerfile: Path) -> str:
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
