"""An episode's artifacts (a Harbor task's, :mod:`agentenv.runner.artifacts`) as its page
lists them: each file's name and size, and the start of a text file. Read like every file
of a job: inside the job folder only, never through a link, at most :data:`MAX_LISTED`."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from agentenv.view.files import Refused, inside, read_regular, walk

MAX_LISTED = 200  # files listed on a page
MAX_PREVIEW = 4096  # bytes of a text file shown


class Listed(BaseModel):
    """One artifact file: its name under the episode's artifacts folder, its size, and
    its start when it is text (UTF-8)."""

    name: str
    size: int
    preview: str | None = None


def list_artifacts(job: Path, relative: str | None) -> list[Listed]:
    """The files of the artifacts folder ``relative`` (to the job folder ``job``), by name;
    nothing for an episode without one or one that is not inside the job."""
    if not relative:
        return []
    try:
        root = inside(job, relative)
    except Refused:
        return []
    listed = []
    for path in walk(root, "")[:MAX_LISTED]:
        if path.is_symlink() or not path.is_file():
            continue
        name = path.relative_to(root).as_posix()
        size = os.lstat(path).st_size
        preview = None
        try:
            data = read_regular(path, 1 << 20, name)[:MAX_PREVIEW]
            preview = data.decode() if b"\0" not in data else None
        except (Refused, UnicodeDecodeError):
            pass
        listed.append(Listed(name=name, size=size, preview=preview))
    return listed


__all__ = ["MAX_LISTED", "Listed", "list_artifacts"]
