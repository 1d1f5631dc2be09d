"""Temporary files and folders on the host, named by the process that owns them
(``agentenv-<kind>-<pid>-<start time>-…`` in the temp folder): what a killed runner left
behind can be told from what a live one is using, and is removed by the next job and by
``agentenv gc``. A normal exit removes its own."""

from __future__ import annotations

import os
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
    """Remove the temporary files and folders that processes of this user killed on this
    host left behind (their owner is gone); returns those removed. Another user's are not
    this process's to judge (its /proc may hide their processes): left alone."""
    host = owner().rsplit(":", 2)[0]
    me = os.getuid()
    found = []
    for path in sorted(Path(tempfile.gettempdir()).glob("agentenv-*")):
        match = _NAME.match(path.name)
        if match is None:
            continue
        try:
            if me != 0 and path.lstat().st_uid != me:
                continue
        except OSError:
            continue
        if owner_alive(f"{host}:{match[2]}:{match[3]}"):
            continue
        if not dry_run:
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            except FileNotFoundError:
                pass
            except OSError:  # not ours to remove after all: say nothing of it
                continue
        found.append(path)
    return found


__all__ = ["collect_leftovers", "folder", "prefix"]
