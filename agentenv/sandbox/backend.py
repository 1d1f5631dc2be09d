"""Sandbox backends: where sandboxes come from. A :class:`SandboxBackend` makes, finds and
removes :class:`~agentenv.sandbox.protocol.Sandbox` objects; everything above this seam (the
pool, the runner, the RL API, regrade, the CLI) calls the functions here and never names a
backend's own classes.

A backend is chosen by name: ``SandboxSpec(backend="podman")``, ``--backend podman``, or
``AGENTENV_BACKEND`` for the default (``docker``). Built in: ``docker`` and ``podman``.
Others register under the entry-point group ``agentenv.sandbox_backends`` with an object (or
a function returning one) that satisfies :class:`SandboxBackend`::

    [project.entry-points."agentenv.sandbox_backends"]
    k8s = "my_package.k8s:backend"

See ``docs/backends.md`` for what a backend must do and how to test it.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

import anyio
from pydantic import BaseModel

from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.protocol import Sandbox, Snapshot
from agentenv.sandbox.spec import SandboxSpec

ENTRY_POINT_GROUP = "agentenv.sandbox_backends"
BUILTIN = {
    "docker": "agentenv.sandbox.docker:backend",
    "podman": "agentenv.sandbox.podman:backend",
}


class Leftover(BaseModel):
    """One object of ours a backend holds (a sandbox, a snapshot, a volume), and why it may
    be collected (``stale`` is ``None`` while it is in use)."""

    kind: str  # "sandbox", "snapshot", "volume" or "network"
    id: str
    name: str
    status: str
    run: str
    owner: str
    job: str = ""  # the job whose run made it (see :func:`labels.job_scope`)
    created: float
    expires: float
    stale: str | None


@runtime_checkable
class SandboxBackend(Protocol):
    """Makes and removes sandboxes of one kind. Every method raises
    :class:`~agentenv.sandbox.errors.EngineUnavailable` when the backend's engine cannot be
    reached; the others are listed per method."""

    name: str
    """What specs and the CLI call it."""

    async def create(self, spec: SandboxSpec) -> Sandbox:
        """A new running sandbox; the caller must close it. Raises
        :class:`~agentenv.sandbox.errors.ImageUnavailable` (no such image, build failed),
        :class:`SandboxError` (the spec cannot be honoured here: bad user, bad option)."""
        ...

    async def attach(self, sandbox_id: str, spec: SandboxSpec) -> Sandbox:
        """Take over a sandbox this or another process made (running or paused). Its labels
        cannot change: if its owner is gone, ``agentenv gc`` may still remove it under the
        new holder; a sandbox meant to be taken over is made with ``outlive_owner``. Raises
        :class:`~agentenv.sandbox.errors.SandboxUnavailable` (gone or stopped),
        :class:`SandboxError` (not one of ours)."""
        ...

    async def fork(self, snapshot: Snapshot, n: int) -> list[Sandbox]:
        """``n`` new sandboxes started from ``snapshot``; all or none."""
        ...

    async def remove_snapshot(self, snapshot: Snapshot) -> None:
        """Delete a snapshot (its forks must be closed first); a missing one is fine."""
        ...

    def leftovers(self) -> list[Leftover]:
        """Every object of ours this backend holds, with why each may be collected.
        Blocking (call it in a thread from async code)."""
        ...

    def remove(self, leftover: Leftover) -> bool:
        """Remove one leftover; ``False`` if it must stay (still in use by something that
        is not ours). A missing one counts as removed. Blocking."""
        ...


def default_backend() -> str:
    """The backend a spec gets when it names none (``AGENTENV_BACKEND``, else docker)."""
    return SandboxSpec().backend


def backend_names() -> list[str]:
    """Every backend that can be asked for by name: the built-in ones and the registered."""
    found = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(found | set(BUILTIN))


@functools.cache
def get_backend(name: str | None = None) -> SandboxBackend:
    """The backend called ``name`` (the default one for ``None``); one object per process.
    Raises :class:`SandboxError` for a name nobody provides."""
    name = name or default_backend()
    target = BUILTIN.get(name)
    if target is None:
        registered = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not registered:
            known = ", ".join(backend_names())
            raise SandboxError(f"no sandbox backend is called {name!r}; known: {known}")
        found: object = registered[0].load()
    else:
        module, _, attr = target.partition(":")
        found = getattr(importlib.import_module(module), attr)
    backend = found() if callable(found) and not isinstance(found, SandboxBackend) else found
    if not isinstance(backend, SandboxBackend):
        raise SandboxError(f"sandbox backend {name!r} ({found!r}) lacks SandboxBackend's methods")
    return backend


async def create(spec: SandboxSpec | None = None) -> Sandbox:
    """A new running sandbox from ``spec`` (defaults: the base image, safe limits), made by
    the spec's backend; the caller must close it (or use :func:`sandbox`)."""
    spec = spec or SandboxSpec()
    return await get_backend(spec.backend).create(spec)


async def attach(sandbox_id: str, spec: SandboxSpec) -> Sandbox:
    """Take over the sandbox ``sandbox_id`` of ``spec``'s backend (see
    :meth:`SandboxBackend.attach`)."""
    return await get_backend(spec.backend).attach(sandbox_id, spec)


async def fork(snapshot: Snapshot, n: int) -> list[Sandbox]:
    """``n`` new sandboxes from ``snapshot``, by the backend that took it; all or none."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return await get_backend(snapshot.backend).fork(snapshot, n)


async def remove_snapshot(snapshot: Snapshot) -> None:
    """Delete ``snapshot`` (sandboxes forked from it must be closed first)."""
    await get_backend(snapshot.backend).remove_snapshot(snapshot)


@asynccontextmanager
async def sandbox(spec: SandboxSpec | None = None) -> AsyncIterator[Sandbox]:
    """``async with sandbox(spec) as sb:``: a sandbox removed when the block ends, however
    it ends."""
    box = await create(spec)
    try:
        yield box
    finally:
        with anyio.CancelScope(shield=True):
            await box.close()


def check_options(spec: SandboxSpec, known: frozenset[str]) -> None:
    """Refuse options a backend does not know (a typo must not be silently ignored), and a
    ``runtime`` that is not a plain name: a path would be run by the engine as host root."""
    unknown = sorted(set(spec.options) - known)
    if unknown:
        raise SandboxError(
            f"the {spec.backend} backend has no option {', '.join(map(repr, unknown))}; "
            f"it knows: {', '.join(sorted(known))}"
        )
    runtime = spec.options.get("runtime")
    if runtime is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", runtime):
        raise SandboxError(
            f"runtime must be the name of one the engine is configured with (runc, crun, "
            f"runsc, ...), not {runtime!r}"
        )


async def fork_by_creating(backend: SandboxBackend, snapshot: Snapshot, n: int) -> list[Sandbox]:
    """A backend's ``fork`` when its snapshots are images: ``n`` sandboxes created at once
    from the snapshot's spec, all closed again if one fails."""
    boxes: list[Sandbox | None] = [None] * n

    async def one(i: int) -> None:
        boxes[i] = await backend.create(snapshot.spec)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    except BaseException:
        with anyio.CancelScope(shield=True):
            for box in boxes:
                if box is not None:
                    await box.close()
        raise
    return [box for box in boxes if box is not None]
