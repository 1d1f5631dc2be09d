"""Durable job folders: an append-only JSON-lines journal (one fsynced line per finished
item; a line cut by a kill is dropped on the next read), the job's ``config.json`` (a re-run
with different settings is refused), and atomic file writes. Eval and refactor jobs share it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError

from agentenv.errors import ConfigMismatch
from agentenv.log import get_logger

CONFIG = "config.json"
log = get_logger(__name__)
M = TypeVar("M", bound=BaseModel)


class JobSettings(BaseModel):
    """Base of a job's ``config.json``: every field must match to resume, except those
    named in ``UNCOMPARED`` (e.g. where things were found)."""

    UNCOMPARED: ClassVar[tuple[str, ...]] = ()

    def differences(self, before: JobSettings) -> list[str]:
        """What differs from ``before``, described for a person."""
        out = []
        now, then = self.model_dump(), before.model_dump()
        for field in now:
            if field in self.UNCOMPARED or now[field] == then.get(field):
                continue
            a, b = then.get(field), now[field]
            if isinstance(a, dict) and isinstance(b, dict):
                out.append(_dict_change(field, a, b))
            else:
                out.append(f"{field}: {a!r} then, {b!r} now")
        return out


def _names(keys: list[str], shown: int = 5) -> str:
    more = f", … {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


def _dict_change(field: str, a: dict[str, Any], b: dict[str, Any]) -> str:
    """What changed in a mapping (such as task id → digest), compactly: counts of added,
    removed and changed keys with the first few names, however many there are."""
    parts = []
    for what, keys in (
        ("added", [k for k in b if k not in a]),
        ("removed", [k for k in a if k not in b]),
        ("changed", [k for k in b if k in a and a[k] != b[k]]),
    ):
        if keys:
            parts.append(f"{len(keys)} {what} ({_names(sorted(map(str, keys)))})")
    return f"{field}: {'; '.join(parts)}"


def check_config(folder: Path, config: JobSettings) -> None:
    """Write ``config.json`` for a new job; refuse (:class:`ConfigMismatch`) one that differs
    from what the folder was started with."""
    path = folder / CONFIG
    if path.exists():
        before = type(config).model_validate_json(path.read_text())
        problems = config.differences(before)
        if problems:
            raise ConfigMismatch(
                f"{folder} holds results of a different job ({'; '.join(problems)}); "
                "use another --out folder, or the same settings to resume"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, config.model_dump_json(indent=1).encode())


def read_lines(path: Path, model: type[M], *, repair: bool = False) -> list[M]:
    """Every complete, valid line of the journal at ``path``. A last line without its
    newline (a kill came mid-write) is ignored, and with ``repair`` cut off the file, so the
    next append starts on a fresh line. A complete line that does not parse is skipped with
    a warning, never deleted: the lines after it are results too."""
    if not path.exists():
        return []
    data = path.read_bytes()
    out: list[M] = []
    complete = data.rfind(b"\n") + 1
    for number, line in enumerate(data[:complete].splitlines(), 1):
        try:
            out.append(model.model_validate_json(line))
        except ValidationError as e:
            log.warning("journal.bad_line", path=str(path), line=number, error=str(e)[:300])
    if repair and complete < len(data):
        with open(path, "r+b") as f:
            f.truncate(complete)
            os.fsync(f.fileno())
    return out


def append_line(path: Path, item: BaseModel) -> None:
    """Append one line and make it durable before returning."""
    line = item.model_dump_json().encode() + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(line):  # a short write is possible; the line must be whole
            written += os.write(fd, line[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes | os.PathLike[str]) -> None:
    """Write ``path`` so that it holds either the old or the new content, never a mix:
    ``data``, or the contents of the file at ``data`` (copied in chunks)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        if isinstance(data, bytes):
            f.write(data)
        else:
            with open(data, "rb") as src:
                shutil.copyfileobj(src, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, value: Any) -> None:
    """Write a JSON document atomically."""
    write_atomic(path, json.dumps(value, indent=1).encode())
