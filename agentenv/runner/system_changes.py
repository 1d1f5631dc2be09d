"""The system files an agent changed: the engine's own list of what differs between the
agent's container and its image (``docker diff``), kept to the places that decide what a
verifier's programs do (binaries, interpreters and their libraries, ``ld.so.preload``,
site-packages, shell start-up files). The engine computes it from the container's layer,
so nothing the agent left in the sandbox can change the answer; a verifier that runs on
the agent's filesystem (a Harbor task) shows it beside its reward."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import stat
from collections.abc import Iterable

import anyio

from agentenv.log import get_logger
from agentenv.sandbox.protocol import Sandbox

log = get_logger(__name__)

WATCHED = (
    "/bin/",
    "/sbin/",
    "/usr/bin/",
    "/usr/sbin/",
    "/usr/local/bin/",
    "/usr/local/sbin/",
    "/usr/libexec/",
    "/lib/",
    "/lib64/",
    "/usr/lib/",
    "/usr/lib64/",
    "/usr/local/lib/",
    "/etc/alternatives/",
    "/etc/profile.d/",
    "/etc/ld.so.conf.d/",
)
"""Folders whose every file is watched (programs, interpreters, libraries, site-packages)."""
WATCHED_FILES = frozenset(
    {
        "/etc/ld.so.preload",
        "/etc/ld.so.conf",
        "/etc/profile",
        "/etc/bash.bashrc",
        "/etc/environment",
        "/root/.bashrc",
        "/root/.profile",
        "/root/.bash_profile",
    }
)
ENGINE_MADE = frozenset({"/sbin/docker-init", "/usr/sbin/docker-init"})
"""What the engine itself puts in every container (its init, mounted where the image may
have no such file): never the agent's doing."""
_KINDS = {0: "changed", 1: "added", 2: "removed", "C": "changed", "A": "added", "D": "removed"}


def watched(path: str) -> bool:
    """Whether ``path`` is a system file whose change is reported (compiled bytecode caches
    left out: running any Python program as root writes them)."""
    if "/__pycache__/" in path or path.endswith(".pyc") or path in ENGINE_MADE:
        return False
    return path in WATCHED_FILES or any(path.startswith(folder) for folder in WATCHED)


def findings(changes: Iterable[tuple[str, str]], allowed: Iterable[str] = ()) -> list[str]:
    """``(kind, path)`` pairs from the engine, as sorted lines like ``/usr/bin/python3
    changed``: the watched ones not matched by an ``allowed`` glob, leaves only (a folder
    is listed as changed whenever a file in it is)."""
    allowed = list(allowed)
    picked = {p: k for k, p in changes if watched(p)}
    leaves = [p for p in picked if not any(q.startswith(p + "/") for q in picked)]
    kept = [p for p in leaves if not any(fnmatch.fnmatchcase(p, g) for g in allowed)]
    return [f"{p} {picked[p]}" for p in sorted(kept)]


async def container_changes(box: Sandbox) -> list[tuple[str, str]] | None:
    """What the engine says changed in ``box``'s filesystem since its image (``None`` when
    its backend cannot say: then no finding is claimed either way)."""
    backend = box.spec.backend
    try:
        if backend == "docker":
            from agentenv.sandbox.docker.engine import get_engine

            engine = await get_engine()
            info = await engine.run(engine.api.inspect_container, box.id)
            driver = info.get("GraphDriver") or {}
            layers = driver.get("Data") or {}
            if driver.get("Name") == "overlay2" and os.path.isdir(layers.get("UpperDir", "")):
                # the container's own layer, read where the engine keeps it: what `docker
                # diff` computes, without its walk of the image (half a second a call)
                lower = [d for d in str(layers.get("LowerDir", "")).split(":") if d]
                found = await anyio.to_thread.run_sync(_upper_changes, layers["UpperDir"], lower)
                if found is not None:
                    return found
            raw = await engine.run(engine.api.diff, box.id) or []
            return [(_KINDS.get(e.get("Kind"), "changed"), str(e.get("Path"))) for e in raw]
        if backend == "podman":
            done = await anyio.run_process(["podman", "diff", box.id], check=False)
            if done.returncode != 0:
                return None
            lines = done.stdout.decode(errors="replace").splitlines()
            pairs = (line.split(" ", 1) for line in lines if " " in line)
            return [(_KINDS.get(k, "changed"), p) for k, p in pairs]
    except Exception as e:  # a report, not a verdict: the engine's failure is logged
        log.warning("system_changes.failed", sandbox=box.id, error=str(e))
    return None


MAX_WALKED = 200_000  # entries of a container's layer read here; past it, the engine's diff


def _upper_changes(upper: str, lower: list[str]) -> list[tuple[str, str]] | None:
    """``(kind, path)`` of what an overlay container layer (``upper``, over the image's
    ``lower`` folders) holds under the watched places: a whiteout (a 0:0 character device)
    is a removal; anything else was added, or changed when the image has it. Links are never
    followed. ``None`` past :data:`MAX_WALKED` entries (the caller asks the engine)."""
    roots = {f.rstrip("/") for f in WATCHED} | set(WATCHED_FILES)
    found: list[tuple[str, str]] = []
    walked = 0
    for root in sorted(roots):
        if not _real_folders(upper, root.rsplit("/", 1)[0]):
            continue  # a link on the way: never followed on this host (nor is it watched)
        stack = [root]
        while stack:
            path = stack.pop()
            try:
                st = os.lstat(upper + path)
            except OSError:
                continue  # not in the container's layer: unchanged
            walked += 1
            if walked > MAX_WALKED:
                return None
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                found.append(("removed", path))
                continue
            before = any(os.path.lexists(layer + path) for layer in lower)
            found.append(("changed" if before else "added", path))
            if stat.S_ISDIR(st.st_mode) and path not in WATCHED_FILES:
                with contextlib.suppress(OSError):  # gone meanwhile
                    stack += [f"{path}/{name}" for name in os.listdir(upper + path)]
    return found


def _real_folders(upper: str, path: str) -> bool:
    """Whether each folder on ``path`` (``/usr/local``) is a real folder in the layer, or
    absent from it (unchanged): a link there would lead the walk out onto this host."""
    at = upper
    for part in [p for p in path.split("/") if p]:
        at = f"{at}/{part}"
        try:
            mode = os.lstat(at).st_mode
        except OSError:
            return True  # not in the layer: nothing below it is either
        if not stat.S_ISDIR(mode):
            return False
    return True
