"""JSON Schemas of the files a user writes or reads, generated from the pydantic models that
parse them (so the schema and the parser cannot drift):

- ``task``: agentenv's ``task.toml`` (:class:`~agentenv.tasks.Task`, without what comes
  from the folder);
- ``cases``: an ``outputs`` check's cases file (:class:`~agentenv.cases.Case`);
- ``script``: the file of ``agentenv serve-model --script``;
- ``result``: one line of an eval job's ``results.jsonl``;
- ``trajectory``: a trajectory file (``trajectories/<task>/<sample>.json``, ``run --out``).

They ship in the package (``agentenv/formats/schemas/``, printed by ``agentenv schema``)
and in the checkout's ``docs/formats/``; ``python -m agentenv.schemas`` writes both again
after a model changed (a test fails until it has run).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

REGENERATE = "python -m agentenv.schemas"
"""The command that writes the schema files again."""
PACKAGED = Path(__file__).resolve().parent / "formats" / "schemas"
"""Where the package keeps them."""
DOCS = Path(__file__).resolve().parent.parent / "docs" / "formats"
"""Where a checkout documents them (absent from an installed package)."""


def _task() -> dict[str, Any]:
    from agentenv.tasks import FROM_THE_FOLDER, Task

    schema = Task.model_json_schema()
    for name in FROM_THE_FOLDER:
        del schema["properties"][name]
    schema.pop("required", None)  # the id defaults to the folder's name
    return schema


def _cases() -> dict[str, Any]:
    from agentenv.cases import Case

    return TypeAdapter(Annotated[list[Case], Field(min_length=1)]).json_schema()


def _script() -> dict[str, Any]:
    from agentenv.testing.script import SCRIPT_FILE

    return SCRIPT_FILE.json_schema()


def _result() -> dict[str, Any]:
    from agentenv.runner.results import EpisodeResult

    return EpisodeResult.model_json_schema(mode="serialization")


def _trajectory() -> dict[str, Any]:
    from agentenv.agent.trajectory import Trajectory

    return Trajectory.model_json_schema(mode="serialization")


FORMATS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "task": ("agentenv's task.toml (a TOML file of this shape)", _task),
    "cases": ("an outputs check's cases file (tests/cases.json)", _cases),
    "script": ("the file of agentenv serve-model --script", _script),
    "result": ("one line of an eval job's results.jsonl", _result),
    "trajectory": ("a trajectory file (trajectories/<task>/<sample>.json)", _trajectory),
}
"""Each format's name → what it is, and how its schema is made."""


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the format ``name`` (one of :data:`FORMATS`), as generated now."""
    if name not in FORMATS:
        raise KeyError(f"no format {name!r}; the formats: {', '.join(FORMATS)}")
    title, make = FORMATS[name]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": f"{title}; generated from agentenv's models by `{REGENERATE}`",
        **make(),
    }


def file_name(name: str) -> str:
    """The file a format's schema is kept in."""
    return f"{name}.schema.json"


def render(name: str) -> str:
    """A schema as its file holds it."""
    return json.dumps(schema(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def shipped(name: str) -> str:
    """A format's schema as the package ships it (what ``agentenv schema NAME`` prints)."""
    if name not in FORMATS:
        raise KeyError(f"no format {name!r}; the formats: {', '.join(FORMATS)}")
    return (PACKAGED / file_name(name)).read_text()


def stale(folder: Path) -> list[str]:
    """The schema files in ``folder`` that are missing or differ from the models."""
    return [
        file_name(name)
        for name in FORMATS
        if not (folder / file_name(name)).is_file()
        or (folder / file_name(name)).read_text() != render(name)
    ]


def write(folder: Path) -> list[Path]:
    """Write every schema file into ``folder``; returns the files."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in FORMATS:
        path = folder / file_name(name)
        path.write_text(render(name))
        written.append(path)
    return written


def main() -> None:
    """``python -m agentenv.schemas``: write the package's schema files, and the checkout's
    ``docs/formats/`` when there is a checkout."""
    folders = [PACKAGED] + ([DOCS] if DOCS.parent.is_dir() else [])
    for folder in folders:
        for path in write(folder):
            print(path)


if __name__ == "__main__":  # pragma: no cover - a command
    main()
    sys.exit(0)


__all__ = ["FORMATS", "REGENERATE", "file_name", "render", "schema", "shipped", "stale", "write"]
