"""Workspace archives: a host folder as the tar an episode starts from, and the agent's
final workdir cut down to what may cross into a checker sandbox.

The agent's tar is hostile input: :func:`safe_workspace` keeps only folders, regular files
(a hard link to one as a bounded copy) and symlinks that resolve inside the workdir, every
entry owned by the agent's user, and never raises on what it is given. Pure host-side tar
work: no sandbox is touched here (the lifecycle in :mod:`agentenv.runner.episode` does that).
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from pathlib import Path

from agentenv.archive import Archive


def _owner(user: str) -> tuple[int, int]:
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def workspace_tar(folder: Path | None, user: str) -> Archive:
    """A host folder as a workspace archive owned by ``user`` (empty without a folder),
    written to a file: a folder of any size is never held in memory."""
    uid, gid = _owner(user)

    def own(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
        return info

    archive = Archive.new()
    with tarfile.open(archive, mode="w") as tar:
        if folder is not None:
            for child in sorted(folder.iterdir()):
                tar.add(child, arcname=child.name, filter=own)
    return archive


def safe_workspace(archive: Archive, workdir: str, user: str) -> tuple[Archive, list[str]]:
    """Re-root a sandbox's tar of ``workdir`` (entries under its base name) at the workdir
    and keep only what may cross into a checker sandbox: folders, regular files (a hard
    link to one as a copy, while the copies add up to less than the input's size), and
    symlinks that resolve inside the workdir; every entry owned by ``user``, no set-id bits.
    Returns the archive (a new file; file contents are copied in chunks) and what was
    dropped. The input is the agent's; this never raises on it (an unreadable archive is an
    empty workspace)."""
    uid, gid = _owner(user)
    base = posixpath.basename(workdir.rstrip("/"))
    dropped: list[str] = []
    try:
        src = tarfile.open(archive, mode="r:")  # noqa: SIM115
        members = src.getmembers()
    except (tarfile.TarError, OSError, EOFError) as e:
        return workspace_tar(None, user), [f"unreadable archive: {e}"]
    out = Archive.new()
    links = {}
    files = {}  # what a hard link may name: a regular file of the workdir met before it
    # a hard link costs the agent a header and us a copy: copies past the input's own size
    # (a million names of one big file) would fill the host's disk
    budget = os.path.getsize(archive)
    for m in members:
        name = posixpath.normpath(m.name)
        if m.issym() and name.startswith(base + "/"):
            links[name[len(base) + 1 :]] = m.linkname
    with src, tarfile.open(out, mode="w") as dst:
        for m in members:
            name = posixpath.normpath(m.name)
            if name == base:
                continue  # the workdir itself: made by the checker sandbox
            if not name.startswith(base + "/"):
                dropped.append(m.name)
                continue
            rel = name[len(base) + 1 :]
            info = tarfile.TarInfo(rel)
            info.uid, info.gid, info.mtime = uid, gid, m.mtime
            info.mode = m.mode & 0o777  # no set-uid, set-gid or sticky bits
            if m.isdir():
                info.type = tarfile.DIRTYPE
                dst.addfile(info)
            elif m.isreg():
                info.size = m.size
                dst.addfile(info, src.extractfile(m))
                files[name] = m
            elif (
                m.islnk()
                and posixpath.normpath(m.linkname) in files
                and files[posixpath.normpath(m.linkname)].size <= budget
            ):
                # a second name of a file: a copy (which of the names the reader met first
                # is up to the order of the walk, so neither may be lost)
                target = files[posixpath.normpath(m.linkname)]
                budget -= target.size
                info.size = target.size
                dst.addfile(info, src.extractfile(target))
            elif m.issym() and _inside(rel, links, workdir):
                info.type, info.linkname = tarfile.SYMTYPE, m.linkname
                dst.addfile(info)
            else:  # devices, FIFOs, hard links out, symlinks leading out (into hidden tests)
                dropped.append(rel)
    return out, dropped


def _inside(link: str, links: dict[str, str], workdir: str) -> bool:
    """Whether the symlink ``link`` (a path relative to the workdir) resolves inside the
    workdir, following the archive's other symlinks as the kernel would: ``up -> .`` then
    ``x -> up/../../etc`` climbs out, though ``up/../..`` alone would not say so."""
    root = workdir.rstrip("/")
    hops = 0

    def walk(at: list[str], path: str) -> list[str] | None:
        nonlocal hops
        if path.startswith("/"):
            if path != root and not path.startswith(root + "/"):
                return None
            at, path = [], path[len(root) :]
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not at:
                    return None  # above the workdir
                at = at[:-1]
                continue
            here = "/".join([*at, part])
            if here in links:
                hops += 1
                if hops > 40:  # a loop: the kernel gives up too
                    return None
                found = walk(at, links[here])
                if found is None:
                    return None
                at = found
            else:
                at = [*at, part]
        return at

    parent = posixpath.dirname(link)
    return walk(parent.split("/") if parent else [], links[link]) is not None
