"""A Harbor task's artifacts, taken into the job folder once the agent is done: its
``[[verifier.collect]]`` commands run (the task's, as the user they name, else the image's; a
failure is recorded, never fatal), then each declared artifact and ``/logs/artifacts``
read as a tar from the engine (no program of the agent's runs to read them) and kept
under the episode's artifacts folder with a ``manifest.json`` of what was taken.

The agent is an adversary here: only regular files and folders are kept (a symlink, a
hard link or a device is left out and counted, so nothing is followed out of the tar),
every name stays under its artifact's place, a destination cannot leave the folder
(refused at load), and all of an episode's artifacts together are capped at
:data:`MAX_BYTES` (one that passes it is left out with a note: it never fills the disk).

Order, as Harbor's: the collect commands of ``main`` run while everything still runs;
then the sandbox is frozen and ``main``'s artifacts are read; a compose task's side
services are then thawed (``main`` stays frozen: the agent's processes cannot interfere),
their collect commands run and their artifacts are read, and they are frozen again."""

from __future__ import annotations

import fnmatch
import io
import json
import shutil
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from agentenv import scratch
from agentenv.archive import Archive
from agentenv.log import get_logger
from agentenv.sandbox.errors import ArchiveTooLarge
from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.kinds.harbor import ARTIFACTS, HarborArtifact, HarborCheck, HarborCollect

log = get_logger(__name__)

MAX_BYTES = 256 << 20  # an episode's artifacts together, as read from the engine
MANIFEST = "manifest.json"
MAIN = "main"


class Taken(BaseModel):
    """One line of the manifest: an artifact and what became of it."""

    source: str
    destination: str  # under the episode's artifacts folder
    service: str = MAIN
    type: str | None = None  # file or directory, once read
    status: str  # ok, missing, too_large, skipped (overlaps one before), failed
    bytes: int = 0
    exclude: list[str] = []
    left_out: int = 0  # entries not kept: links, devices, names leaving the artifact
    note: str | None = None


class Collecting:
    """One episode's collection into a tar of its artifacts folder (see the module)."""

    def __init__(self, box: Sandbox, check: HarborCheck):
        self.box = box
        self.check = check
        self.commands: list[dict[str, Any]] = []
        self.taken: list[Taken] = []
        self.used = 0
        self.claimed: list[PurePosixPath] = []
        self.archive = Archive.new()
        self._tar = tarfile.open(self.archive, "w")  # noqa: SIM115 (closed by done())

    def entries(self, service: str) -> list[HarborArtifact]:
        """The service's artifacts; ``/logs/artifacts`` first for main (Harbor's
        convention), unless a main entry names it (with its own exclude, say)."""
        mine = [a for a in self.check.artifacts if (a.service or MAIN) == service]
        if service == MAIN and not any(a.source.rstrip("/") == ARTIFACTS for a in mine):
            mine.insert(0, HarborArtifact(source=ARTIFACTS))
        return mine

    def hooks(self, service: str | None) -> list[HarborCollect]:
        """The collect commands of ``main`` (``None``: of every other service)."""
        return [h for h in self.check.collect if (h.service == MAIN) == (service == MAIN)]

    async def run_hooks(self, hooks: list[HarborCollect]) -> None:
        """Run each command; what it did (or why it could not run) goes in the manifest."""
        for hook in hooks:
            line: dict[str, Any] = {"command": hook.command, "service": hook.service}
            try:
                if hook.service == MAIN:
                    # as Harbor: the user it names, else the sandbox's own (the image's)
                    result = await self.box.exec(
                        hook.command, timeout=hook.timeout_s, user=hook.user
                    )
                else:
                    exec_in = getattr(self.box, "service_exec", None)
                    if exec_in is None:
                        raise KeyError(hook.service)
                    result = await exec_in(
                        hook.service, hook.command, timeout=hook.timeout_s, user=hook.user
                    )
                line |= {"exit_code": result.exit_code, "timed_out": result.timed_out}
                if not result.ok:
                    line["stderr"] = result.stderr[-1000:]
            except KeyError:
                line["error"] = f"no compose service {hook.service!r} in this task"
            except Exception as e:  # the task's command: recorded, never the episode's end
                line["error"] = f"{type(e).__name__}: {e}"[:1000]
            if "error" in line or line.get("exit_code"):
                log.info("artifacts.collect_failed", **line)
            self.commands.append(line)

    async def take(self, service: str) -> None:
        """Read the service's artifacts into the tar."""
        for artifact in self.entries(service):
            self.taken.append(await self._take_one(artifact, service))

    async def _take_one(self, artifact: HarborArtifact, service: str) -> Taken:
        target = _relative(artifact.destination or artifact.source)
        taken = Taken(
            source=artifact.source,
            destination=str(target),
            service=service,
            exclude=artifact.exclude,
            status="ok",
        )
        if any(_overlap(target, c) for c in self.claimed):
            return taken.model_copy(update={"status": "skipped", "note": "overlaps one before"})
        self.claimed.append(target)
        room = MAX_BYTES - self.used
        with scratch.folder("artifact") as tmp:
            tar = Path(tmp) / "a.tar"
            try:
                await self._download(artifact.source, service, tar, room)
            except FileNotFoundError:
                return taken.model_copy(update={"status": "missing"})
            except ArchiveTooLarge:
                note = f"left out: the episode's artifacts pass {MAX_BYTES} bytes"
                return taken.model_copy(update={"status": "too_large", "note": note})
            except KeyError:
                note = f"no compose service {service!r} in this task"
                return taken.model_copy(update={"status": "failed", "note": note})
            except Exception as e:
                note = f"{type(e).__name__}: {e}"[:500]
                return taken.model_copy(update={"status": "failed", "note": note})
            self.used += tar.stat().st_size
            return self._copy(tar, target, artifact.exclude, taken)

    async def _download(self, source: str, service: str, tar: Path, room: int) -> None:
        if service == MAIN:
            await self.box.download_to(source, tar, max_bytes=room)
            return
        download = getattr(self.box, "service_download_to", None)
        if download is None:
            raise KeyError(service)
        await download(service, source, tar, max_bytes=room)

    def _copy(self, tar: Path, target: PurePosixPath, exclude: list[str], taken: Taken) -> Taken:
        """Keep the tar's regular files and folders under ``target``: the engine's tar
        names its top entry by the source's base name, which becomes ``target``."""
        size = left_out = 0
        kind = None
        with tarfile.open(tar) as src:
            for member in src:
                rel = _inside(member.name)
                if rel is None or not (member.isfile() or member.isdir()):
                    left_out += 1
                    continue
                if not rel.parts[1:] and kind is None:
                    kind = "directory" if member.isdir() else "file"
                inner = "/".join(rel.parts[1:])
                if inner and _excluded(inner, exclude):
                    continue
                name = str(target.joinpath(*rel.parts[1:]))
                size += self._add(src, member, name)
        note = f"{left_out} links, devices or odd names left out" if left_out else None
        return taken.model_copy(
            update={"type": kind, "bytes": size, "left_out": left_out, "note": note}
        )

    def _add(self, src: tarfile.TarFile, member: tarfile.TarInfo, name: str) -> int:
        info = tarfile.TarInfo(name)
        info.mtime = member.mtime
        if member.isdir():
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            self._tar.addfile(info)
            return 0
        info.size, info.mode = member.size, 0o644
        self._tar.addfile(info, src.extractfile(member))
        return member.size

    def done(self) -> Archive:
        """The tar, with its manifest, closed."""
        manifest = {
            "entries": [t.model_dump() for t in self.taken],
            "collect": self.commands,
            "max_bytes": MAX_BYTES,
        }
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mode = len(data), 0o644
        self._tar.addfile(info, io.BytesIO(data))
        self._tar.close()
        return self.archive


async def collect_before_pause(collecting: Collecting) -> None:
    """``main``'s collect commands, while the agent's sandbox still runs."""
    await collecting.run_hooks(collecting.hooks(MAIN))


async def collect_paused(collecting: Collecting) -> Archive:
    """With the sandbox frozen: ``main``'s artifacts, then the side services' (thawed for
    their commands and frozen again, ``main`` frozen throughout)."""
    await collecting.take(MAIN)
    sides = {a.service for a in collecting.check.artifacts if (a.service or MAIN) != MAIN}
    sides |= {h.service for h in collecting.hooks(None)}
    group = getattr(collecting.box, "group", None)
    if sides and group is not None:
        await group.thaw()
        try:
            await collecting.run_hooks(collecting.hooks(None))
        finally:
            await group.freeze()
    elif sides:
        await collecting.run_hooks(collecting.hooks(None))  # recorded: no such service
    for side in sorted(s for s in sides if s is not None):
        await collecting.take(side)
    return collecting.done()


def write_artifacts(archive: Archive, folder: Path) -> None:
    """Lay the tar of :class:`Collecting` out as ``folder`` (replaced if there): its own
    tar, but only files and folders under ``folder`` are made all the same."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        for member in tar:
            rel = _inside(member.name)
            if rel is None:
                continue
            path = folder.joinpath(*rel.parts)
            if member.isdir():
                path.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                path.parent.mkdir(parents=True, exist_ok=True)
                data = tar.extractfile(member)
                assert data is not None
                with open(path, "wb") as out:
                    shutil.copyfileobj(data, out)


def by_step(parts: list[tuple[str, Archive]]) -> Archive:
    """One tar of a multi-step trial's artifacts: each step's collection (a
    :class:`Collecting` tar, its manifest.json with it) under ``steps/<name>/``, as Harbor
    keeps a step's under ``steps/{name}/``. Only files and folders are carried over."""
    out = Archive.new()
    with tarfile.open(out, "w") as tar:
        for name, archive in parts:
            with tarfile.open(archive) as src:
                for member in src:
                    rel = _inside(member.name)
                    if rel is None or not (member.isfile() or member.isdir()):
                        continue
                    member.name = str(PurePosixPath("steps", name, rel))
                    tar.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out


def _relative(path: str) -> PurePosixPath:
    """A source or destination as a path under the artifacts folder (no root, no '..')."""
    parts = [p for p in PurePosixPath(path).parts if p not in ("/", "", "..", ".")]
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _inside(name: str) -> PurePosixPath | None:
    """A tar entry's name as a relative path, ``None`` if it would leave (absolute, '..')."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    return PurePosixPath(*[p for p in path.parts if p != "."]) if path.parts else None


def _overlap(a: PurePosixPath, b: PurePosixPath) -> bool:
    return a == b or a in b.parents or b in a.parents or str(a) == "." or str(b) == "."


def _excluded(inner: str, patterns: list[str]) -> bool:
    """Whether tar's ``--exclude`` (unanchored, wildcards crossing '/') drops ``inner``:
    a pattern matching any run of its parts, so a folder's contents go with it."""
    parts = inner.split("/")
    runs = ["/".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(run, p) for p in patterns for run in runs)


__all__ = [
    "MAX_BYTES",
    "Collecting",
    "by_step",
    "collect_before_pause",
    "collect_paused",
    "write_artifacts",
]
