"""What is wrong with a file a user wrote, as data: :class:`Problem` names the file, the line
(where the format gives one) and the field. :class:`Problems` carries several at once, so
that ``agentenv validate`` can print every one and a loader can still raise a single
:class:`~agentenv.errors.TaskError`."""

from __future__ import annotations

import difflib
import functools
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentenv.errors import TaskError

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong: in ``file`` (at ``line`` when known; ``None`` when the message
    says where, as for a task id used twice), with ``field`` (dotted, as
    ``environment.memory_mb`` or ``case 2 (add).expect``) when it is about one."""

    file: Path | str | None  # None: the message names what it is about
    message: str
    field: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        field = f"{self.field}: " if self.field else ""
        return f"{field}{self.message}" if self.file is None else f"{where}: {field}{self.message}"


class Problems(TaskError):
    """Several problems found together; its text is one line per problem."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(map(str, self.problems)))


def field_names(model: Any, where: tuple[str | int, ...] = ()) -> list[str]:
    """The field names of a type (a pydantic model, or a list of them) at the place
    ``where`` (a pydantic error's location, tags of discriminated unions included): what a
    misspelt key there is compared with."""
    node = _resolve(_schema(model), _schema(model))
    for part in where:
        node = _resolve(_step(node, part), _schema(model))
        if not node:
            return []
    properties = node.get("properties")
    return sorted(properties) if isinstance(properties, dict) else []


@functools.cache
def _schema(model: Any) -> dict[str, Any]:
    return TypeAdapter(model).json_schema()


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` followed (to the root's ``$defs``), and a nullable
    ``anyOf`` (``X | None``) taken as its ``X``."""
    while True:
        if "$ref" in node:
            node = root.get("$defs", {}).get(str(node["$ref"]).rsplit("/", 1)[-1], {})
        elif "anyOf" in node and "discriminator" not in node:
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            if len(options) != 1:
                return node
            node = options[0]
        else:
            return node


def _step(node: dict[str, Any], part: str | int) -> dict[str, Any]:
    properties = node.get("properties", {})
    if isinstance(part, str) and part in properties:
        return dict(properties[part])
    if isinstance(part, int) and isinstance(node.get("items"), dict):
        return dict(node["items"])
    mapping = node.get("discriminator", {}).get("mapping", {})
    if part in mapping:
        return {"$ref": mapping[part]}
    return {}


def _got(value: Any) -> str:
    if isinstance(value, dict | list):
        return f" (got a JSON {'object' if isinstance(value, dict) else 'list'})"
    if isinstance(value, str | int | float | bool):
        text = repr(value)
        return f" (got {text[:60]}{'…' if len(text) > 60 else ''})"
    return ""


def from_validation(
    file: Path | str,
    error: ValidationError,
    *,
    model: Any = None,
    prefix: str = "",
    rename: dict[str, str] | None = None,
) -> list[Problem]:
    """One problem per error pydantic found, each naming its field (``prefix`` first);
    a misspelt key is compared with the field names ``model`` has there, and ``rename`` maps a
    top-level field to the name the file used for it (Harbor's ``environment.cpus``)."""
    problems = []
    for err in error.errors():
        loc = [str(part) for part in err["loc"]]
        if rename and loc and loc[0] in rename:
            loc[0] = rename[loc[0]]
        field = ".".join([prefix, *loc] if prefix else loc) or "(top level)"
        message = str(err["msg"])
        if err["type"] == "extra_forbidden":
            known = field_names(model, tuple(err["loc"][:-1])) if model is not None else []
            close = difflib.get_close_matches(loc[-1], known, n=1)
            message += f": did you mean {close[0]!r}?" if close else ""
        else:
            message += _got(err.get("input"))
        problems.append(Problem(file, message, field=field))
    return problems


def from_toml(file: Path, error: tomllib.TOMLDecodeError) -> Problem:
    """A TOML syntax error, at its line."""
    text = str(error)
    found = _TOML_POSITION.search(text)
    if found is None:
        return Problem(file, f"not valid TOML: {text}")
    message = f"{text[: found.start()]} (column {found.group(2)})"
    return Problem(file, f"not valid TOML: {message}", line=int(found.group(1)))


def read_json_list(path: Path, what: str, shown: Path | str | None = None) -> list[Any]:
    """The non-empty JSON list in ``path`` (a file of ``what``, as "cases"); raises
    :class:`Problems` naming the file as ``shown`` (default: ``path``), and the line of a
    syntax error."""
    shown = path if shown is None else shown
    try:
        raw = json.loads(path.read_bytes())
    except json.JSONDecodeError as e:
        raise Problems([from_json(shown, e)]) from e
    except (OSError, UnicodeDecodeError) as e:
        raise Problems([Problem(shown, f"cannot read the {what} file: {e}")]) from e
    if not isinstance(raw, list) or not raw:
        raise Problems([Problem(shown, f"must be a non-empty JSON list of {what}")])
    return raw


def from_json(file: Path | str, error: json.JSONDecodeError) -> Problem:
    """A JSON syntax error, at its line."""
    return Problem(file, f"not valid JSON: {error.msg} (column {error.colno})", line=error.lineno)


__all__ = [
    "Problem",
    "Problems",
    "field_names",
    "from_json",
    "from_toml",
    "from_validation",
    "read_json_list",
]
