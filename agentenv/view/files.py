"""The viewer's file access, made safe against a job folder written by someone else: it reads
only regular files inside the job folder (no FIFO, device or link out of it, nothing past a
size cap) and writes the site without ever following a link planted in it."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from agentenv.errors import AgentenvError

MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024  # a long episode is a few MB; beyond this, a mistake
MAX_PATCH_BYTES = 16 * 1024 * 1024
MAX_JOURNAL_BYTES = 1024 * 1024 * 1024  # results.jsonl of a very large job is ~100s of MB
MAX_DEPTH = 32  # folders below a folder of trajectories that are looked into


class Refused(AgentenvError):
    """A file the viewer will not read or a place it will not write; the message names it
    relative to the job (never a host path the job did not already show)."""


def inside(root: Path, relative: str) -> Path:
    """``root / relative`` with every link resolved, when that is inside ``root``; raises
    :class:`Refused` otherwise (an absolute path, ``..``, a link out, a NUL)."""
    try:
        base = root.resolve()
        path = (base / relative).resolve()
    except (OSError, ValueError) as e:  # a NUL, a loop of links
        raise Refused(f"{relative!r}: not a usable path: {e}") from e
    if not path.is_relative_to(base):
        raise Refused(f"{relative!r} is outside the job folder: not read")
    return path


def read_regular(path: Path, limit: int, name: str) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes, never
    blocking on a FIFO nor following a link at its last component; raises :class:`Refused`
    naming it as ``name``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError) as e:
        raise Refused(f"{name}: cannot read it: {getattr(e, 'strerror', None) or e}") from e
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{name}: not a regular file")
        if st.st_size > limit:
            raise Refused(f"{name}: {st.st_size:,} bytes, larger than the {limit:,} shown")
        data = file.read(limit + 1)
    if len(data) > limit:  # grew while read
        raise Refused(f"{name}: larger than the {limit:,} bytes shown")
    return data


def walk(root: Path, suffix: str) -> list[Path]:
    """The files named ``*suffix`` under ``root`` (not through links to folders, at most
    :data:`MAX_DEPTH` folders deep, without recursion: a tree of any depth is fine)."""
    found, todo = [], [(root, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if depth < MAX_DEPTH:
                    todo.append((Path(entry.path), depth + 1))
            elif entry.name.endswith(suffix):
                found.append(Path(entry.path))
    return sorted(found)


def real_folder(path: Path) -> Path:
    """``path`` as a real folder: made if missing; a link at its name is removed (never
    followed) and a folder made instead."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.lstat(path).st_mode):
            path.unlink()
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole: a fresh temporary file beside it renamed over it, so a browser
    never sees half a page and a link at either name is replaced, not written through."""
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(partial, 0o644)  # mkstemp's 0600 would hide the site from a web server
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
