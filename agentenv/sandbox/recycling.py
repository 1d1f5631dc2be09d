"""Recycling: within a :func:`recycling` block, a sandbox the episode lifecycle hands back is
made as new (every process killed but init and keep-alive, its writable folders emptied and
checked: ``recycle()`` of the container backends) and kept paused for the next episode of
the same spec, instead of being removed and another created. On two cores a container's
create and remove cost about a third of a CPU-second; a recycle costs a few milliseconds of
it. Outside a block, :func:`reuse_or_create` creates and :func:`hand_back` closes, as
before.

Only a read-only sandbox whose untrusted code ran unprivileged is recycled (its only
writable places are the ones emptied); anything else, or one that is not clean afterwards,
is closed. Idle sandboxes are removed when the block ends, and are labelled like any other,
so a killed process leaves them to ``agentenv gc``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

import anyio

from agentenv.log import get_logger
from agentenv.sandbox.backend import attach, create
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.protocol import Sandbox
from agentenv.sandbox.spec import SandboxSpec

__all__ = ["Recycler", "hand_back", "handed_back", "recycling", "reuse_or_create"]

log = get_logger(__name__)
_current: ContextVar[Recycler | None] = ContextVar("agentenv_recycler", default=None)
_CLOSING_AT_ONCE = 8


class Recycler:
    """Idle recycled sandboxes, paused, by spec. Without ``max_idle`` every clean sandbox
    handed back is kept: never more than the block had at once (each was in use before it
    went idle), so the host holds no more than at the block's busiest moment; with it, at
    most that many wait idle, the rest are closed."""

    def __init__(self, max_idle: int | None = None):
        self.max_idle = max_idle
        self.created = 0  # sandboxes made because none of the spec was idle
        self.reused = 0  # sandboxes handed out again
        self.refused = 0  # handed back but closed: not recyclable, or not clean
        self._idle: dict[SandboxSpec, list[Sandbox]] = {}
        self._born: dict[str, float] = {}  # when each sandbox this made was created

    @property
    def idle(self) -> int:
        """Sandboxes waiting, paused, to be taken."""
        return sum(len(boxes) for boxes in self._idle.values())

    async def take(self, spec: SandboxSpec) -> Sandbox:
        """A running sandbox of ``spec``: an idle recycled one resumed, else a new one."""
        boxes = self._idle.get(spec, [])
        while boxes:
            box = boxes.pop()
            try:
                await box.resume()
            except SandboxError as e:
                log.info("recycling.discard", id=box.id[:12], error=str(e))
                await box.close()
                continue
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await box.close()
                raise
            self.reused += 1
            return box
        self.created += 1
        box = await create(spec)
        self._born[box.id] = time.monotonic()
        return box

    async def give(self, box: Sandbox, *, reusable: bool = True) -> None:
        """Take back a sandbox the caller is done with: recycled and kept if ``reusable``
        (its untrusted code ran unprivileged) and it comes out clean, else closed."""
        with anyio.CancelScope(shield=True):
            recycle = getattr(box, "recycle", None)
            # past half its TTL, `agentenv gc` could take it from a later episode
            age = time.monotonic() - self._born.get(box.id, time.monotonic())
            young = age < box.spec.ttl_s / 2
            room = self.max_idle is None or self.idle < self.max_idle
            if reusable and young and recycle is not None and room:
                try:
                    # the next episode gets a handle of its own; this one (and any copy
                    # the last episode kept) refuses every call from now on, as a closed
                    # sandbox's would, instead of reaching into the next episode
                    await box.pause()  # frozen, the new handle starts no executor yet
                    fresh = await attach(box.id, box.spec)
                    box.detach()
                    box = fresh
                    if await box.recycle():  # type: ignore[attr-defined]
                        await box.pause()
                        self._idle.setdefault(box.spec, []).append(box)
                        return
                except SandboxError as e:
                    log.info("recycling.failed", id=box.id[:12], error=str(e))
            self.refused += 1
            self._born.pop(box.id, None)
            await box.close()

    async def aclose(self) -> None:
        """Remove every idle sandbox, a few at a time: the engine removes them one after
        another anyway, and Docker 20.10 lost track of some of 200 force-removed at once
        under load (each call then waits out the client's timeout)."""
        with anyio.CancelScope(shield=True):
            boxes = [box for group in self._idle.values() for box in group]
            self._idle.clear()
            limiter = anyio.CapacityLimiter(_CLOSING_AT_ONCE)

            async def close(box: Sandbox) -> None:
                async with limiter:
                    await box.close()

            async with anyio.create_task_group() as tg:
                for box in boxes:
                    tg.start_soon(close, box)


@asynccontextmanager
async def recycling(max_idle: int | None = None) -> AsyncIterator[Recycler]:
    """Recycle the sandboxes the episode lifecycle hands back within this block (and the
    tasks it starts); the idle ones are removed at its end. Nested blocks share the
    outermost one's."""
    outer = _current.get()
    if outer is not None:
        yield outer
        return
    recycler = Recycler(max_idle)
    token = _current.set(recycler)
    try:
        yield recycler
    finally:
        _current.reset(token)
        await recycler.aclose()
        if recycler.created or recycler.reused:
            log.info(
                "recycling.done",
                created=recycler.created,
                reused=recycler.reused,
                refused=recycler.refused,
            )


async def reuse_or_create(spec: SandboxSpec) -> Sandbox:
    """A running sandbox of ``spec``: recycled within a :func:`recycling` block when one is
    idle, else new."""
    recycler = _current.get()
    return await recycler.take(spec) if recycler is not None else await create(spec)


async def hand_back(box: Sandbox, *, reusable: bool = True) -> None:
    """Hand back a sandbox: recycled within a :func:`recycling` block, else closed."""
    recycler = _current.get()
    if recycler is not None:
        await recycler.give(box, reusable=reusable)
    else:
        await box.close()


@asynccontextmanager
async def handed_back(box: Sandbox, *, reusable: bool = True) -> AsyncIterator[Sandbox]:
    """``async with handed_back(box):`` the block uses the sandbox; a block that ends well
    hands it back (:func:`hand_back`), one that raises (or is cancelled) closes it: a
    sandbox whose episode failed is never recycled."""
    try:
        yield box
    except BaseException:
        with anyio.CancelScope(shield=True):
            await box.close()
        raise
    await hand_back(box, reusable=reusable)
