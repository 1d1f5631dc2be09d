"""Temporary files and folders on the host, named by the process that owns them
(``agentenv-<kind>-<pid>-<start time>-…`` in the temp folder): what a killed runner left
behind can be told from what a live one is using, and is removed by the next job and by
``agentenv gc``. A normal exit removes its own."""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from pathlib import Path

from agentenv.sandbox.labels import owner, owner_alive

_NAME = re.compile(r"agentenv-([a-z]+)-(\d+)-(\d+)-")


def prefix(kind: str) -> str:
    """The name a temporary file or folder of ``kind`` (lower-case letters) starts with."""
    if not kind.isalpha() or not kind.islower():
        raise ValueError(f"a scratch kind is lower-case letters, not {kind!r}")
    _, pid, start = owner().rsplit(":", 2)
    return f"agentenv-{kind}-{pid}-{start}-"


def folder(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder of ``kind``, removed when its ``with`` ends."""
    return tempfile.TemporaryDirectory(prefix=prefix(kind))


def collect_leftovers(*, dry_run: bool = False) -> list[Path]:
    """Remove the temporary files and folders that processes killed on this host left
    behind (their owner is gone); returns them."""
    host = owner().rsplit(":", 2)[0]
    found = []
    for path in sorted(Path(tempfile.gettempdir()).glob("agentenv-*")):
        match = _NAME.match(path.name)
        if match is None or owner_alive(f"{host}:{match[2]}:{match[3]}"):
            continue
        found.append(path)
        if dry_run:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return found


__all__ = ["collect_leftovers", "folder", "prefix"]
