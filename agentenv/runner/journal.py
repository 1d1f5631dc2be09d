"""Durable job folders: an append-only JSON-lines journal (one fsynced line per finished
item; a line cut by a kill is dropped on the next read), the job's ``config.json`` (a re-run
with different settings is refused), and atomic file writes. Eval and refactor jobs share it.

A folder is a job's when its ``config.json`` is one: it names the job's ``kind`` (folders
of earlier versions, without it, are told apart by their shape). Only a job folder of the
same kind, an empty folder or none is used; anything else is refused before a byte is
written to it, so a folder of the user's own files is never written into."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError

from agentenv.errors import ConfigMismatch
from agentenv.log import get_logger

CONFIG = "config.json"
log = get_logger(__name__)
M = TypeVar("M", bound=BaseModel)
S = TypeVar("S", bound="JobSettings")
# the modules defining the kinds of job, imported to tell one job's folder from another's
_KIND_MODULES = ("agentenv.runner.results", "agentenv.refactor.job")


class JobSettings(BaseModel):
    """Base of a job's ``config.json``: every field must match to resume, except those
    named in ``UNCOMPARED`` (e.g. where things were found).

    A kind of job declares ``kind`` (a literal field with its name as default: written to
    ``config.json``, which marks the folder as that kind's), its ``JOURNAL`` file, and the
    mapping field ``ITEMS`` (item name → what it is, e.g. task id → digest) with ``ITEM_KEY``,
    the field of a journal line naming its item: an item whose entry alone changed can be
    run again (``redo_changed`` in :func:`check_config`)."""

    UNCOMPARED: ClassVar[tuple[str, ...]] = ()
    JOURNAL: ClassVar[str] = ""
    ITEMS: ClassVar[str] = ""
    ITEM_KEY: ClassVar[str] = ""
    KINDS: ClassVar[dict[str, type[JobSettings]]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        kind = cls.model_fields.get("kind")
        if kind is not None and isinstance(kind.default, str):
            JobSettings.KINDS[kind.default] = cls

    @classmethod
    def kind_name(cls) -> str:
        """The kind of job (``eval``, ``refactor``) these settings are of."""
        return str(cls.model_fields["kind"].default)

    def changed_items(self, before: JobSettings) -> list[str]:
        """The items whose entry in ``ITEMS`` changed since ``before``, when that is all that
        differs (else nothing): those alone can be run again, keeping every other result."""
        if not self.ITEMS:
            return []
        now, then = getattr(self, self.ITEMS), getattr(before, self.ITEMS)
        changed = sorted(k for k in now if k in then and now[k] != then[k])
        if not changed:
            return []
        same = before.model_copy(update={self.ITEMS: {**then, **{k: now[k] for k in changed}}})
        return [] if self.differences(same) else changed

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


def _untouched(folder: Path, what: str) -> ConfigMismatch:
    return ConfigMismatch(
        f"{folder} {what}; nothing in it was touched. Give --out a new or empty "
        "folder (it is made if missing), or a job folder of this kind to resume it"
    )


def _listing(folder: Path, shown: int = 6) -> str:
    names = sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(folder))
    return _names(names, shown)


def read_job(folder: Path, kind: type[S]) -> S | None:
    """The settings of the job of ``kind`` in ``folder``; ``None`` when there is none yet
    (no such folder, or an empty one). Anything else there (a file, a folder of other files,
    a ``config.json`` that is not a job's, a job of another kind) raises
    :class:`ConfigMismatch` saying what is there; nothing is written."""
    if not folder.exists():
        return None
    if not folder.is_dir():
        raise _untouched(folder, "is a file, not a folder")
    path = folder / CONFIG
    if not path.exists():
        try:
            if not any(folder.iterdir()):
                return None
            there = _listing(folder)
        except OSError as e:
            raise _untouched(folder, f"cannot be read ({e.strerror or e})") from e
        raise _untouched(
            folder,
            f"is not an agentenv job folder (no {CONFIG}) and is not empty: it holds {there}",
        )
    try:
        text = path.read_bytes()
    except OSError as e:
        raise _untouched(folder, f"holds a {CONFIG} that cannot be read ({e.strerror or e})") from e
    try:
        return kind.model_validate_json(text)
    except ValidationError as e:
        wrong = e.errors()[0]
    for module in _KIND_MODULES:  # every kind registered, to name the one that is there
        importlib.import_module(module)
    using = kind.kind_name()
    for name, other in JobSettings.KINDS.items():
        try:
            other.model_validate_json(text)
        except ValidationError:
            continue
        raise _untouched(folder, f"holds an agentenv {name} job; agentenv {using} cannot use it")
    where = ".".join(map(str, wrong["loc"])) or "the file"
    raise ConfigMismatch(
        f"{path} is not the config of an agentenv {using} job ({where}: "
        f"{wrong['msg']}), so {folder} is not its job folder; nothing in it was touched. "
        "Give --out a new or empty folder (it is made if missing)"
    )


def check_config(folder: Path, config: JobSettings, *, redo_changed: bool = False) -> list[str]:
    """Start the job in ``folder`` (made if missing) by writing its ``config.json``, or check
    that the job there is this one; refuse (:class:`ConfigMismatch`, nothing written) a
    folder that is not a job of this kind (see :func:`read_job`) or holds a different job.

    When the difference is only that some items changed (a task fixed after a failed run),
    the message says how to run them again; with ``redo_changed`` their journal lines are
    dropped, the new config is written, and their names are returned (run them again)."""
    before = read_job(folder, type(config))
    if before is None:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / CONFIG, config.model_dump_json(indent=1).encode())
        return []
    problems = config.differences(before)
    if not problems:
        return []
    changed = config.changed_items(before)
    if not changed:
        raise ConfigMismatch(
            f"{folder} holds results of a different job ({'; '.join(problems)}); "
            "use another --out folder, or the same settings to resume"
        )
    if not redo_changed:
        raise ConfigMismatch(
            f"{folder} holds results of a different job ({'; '.join(problems)}). To run "
            f"just those {config.ITEMS} again, keeping every other result, add "
            "--redo-changed to the same command; or use another --out folder"
        )
    # the lines first: a kill between the two leaves the old config, refused as before
    drop_lines(folder / config.JOURNAL, config.ITEM_KEY, set(changed))
    write_atomic(folder / CONFIG, config.model_dump_json(indent=1).encode())
    log.info("journal.redo_changed", folder=str(folder), items=changed)
    return changed


def drop_lines(path: Path, key: str, items: set[str]) -> None:
    """Rewrite the journal at ``path`` without the lines whose field ``key`` is one of
    ``items`` (atomically; a line that does not parse is kept, as are the others)."""
    if not path.exists():
        return
    data = path.read_bytes()
    kept = []
    for line in data[: data.rfind(b"\n") + 1].splitlines(keepends=True):
        try:
            item = json.loads(line).get(key)
        except (ValueError, AttributeError):
            item = None
        if item not in items:
            kept.append(line)
    write_atomic(path, b"".join(kept))


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
    ``data``, or the contents of the file at ``data`` (copied in chunks). The new content
    goes to a fresh temporary file beside it, renamed over it: a link at either name is
    replaced, never written through, and two writers never share a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                with open(data, "rb") as src:
                    shutil.copyfileobj(src, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # as a plain open would make it (mkstemp's is 0600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: Path, value: Any) -> None:
    """Write a JSON document atomically."""
    write_atomic(path, json.dumps(value, indent=1).encode())
