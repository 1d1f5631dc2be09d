"""``SandboxPool``: sandboxes created ahead of time and kept paused, so an episode starts in
milliseconds instead of paying for container creation. Any backend's (the spec's)."""

from __future__ import annotations

from types import TracebackType

import anyio
import anyio.abc

from agentenv.log import get_logger
from agentenv.sandbox.backend import create
from agentenv.sandbox.errors import SandboxError
from agentenv.sandbox.protocol import Sandbox
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)
_GIVE_UP_AFTER = 3  # consecutive creation failures of one filler


class SandboxPool:
    """Keeps ``size`` paused sandboxes of one spec ready. ``acquire()`` resumes one (and the
    pool refills in the background); the caller owns and closes what it acquired.

    Use as ``async with SandboxPool(spec, size=8) as pool: box = await pool.acquire()``.
    """

    def __init__(self, spec: SandboxSpec | None = None, size: int = 4):
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        self.spec = spec or SandboxSpec()
        self.size = size
        self._slots = anyio.Semaphore(size)
        self._send, self._receive = anyio.create_memory_object_stream[Sandbox](size)
        self._tg: anyio.abc.TaskGroup | None = None
        self._failure: Exception | None = None

    async def __aenter__(self) -> SandboxPool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for _ in range(min(self.size, 4)):  # creation is paced by the engine anyway
            self._tg.start_soon(self._fill)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        try:
            if e is not None and not isinstance(e, anyio.get_cancelled_exc_class()):
                # The body's own error: let it out as it is, not wrapped in an ExceptionGroup
                # (the fill tasks catch their own failures; they are only cancelled here).
                # That includes BaseExceptions such as pytest's Failed: grouped, they would
                # kill the test runner's event loop task.
                await self._tg.__aexit__(None, None, None)
            else:
                await self._tg.__aexit__(et, e, tb)
        finally:
            # Whatever happened in the body, no pooled sandbox outlives the pool.
            with anyio.CancelScope(shield=True):
                self._send.close()
                async for box in self._receive:
                    await box.close()

    async def _fill(self) -> None:
        failures = 0
        while self._failure is None:
            await self._slots.acquire()
            try:
                box = await create(self.spec)
            except Exception as e:
                self._slots.release()
                failures += 1
                log.warning("pool.create_failed", error=str(e), failures=failures)
                if failures >= _GIVE_UP_AFTER:
                    # Tell acquire() instead of retrying forever: the spec itself is bad
                    # (no such image, no such user) or the engine is gone.
                    self._failure = e
                    self._send.close()
                    return
                await anyio.sleep(min(0.5 * 2**failures, 10))
                continue
            failures = 0
            with anyio.CancelScope(shield=True):
                try:
                    await box.pause()
                    self._send.send_nowait(box)  # never blocks: one slot per sandbox
                except (SandboxError, anyio.ClosedResourceError) as e:
                    log.warning("pool.pause_failed", id=box.id[:12], error=str(e))
                    await box.close()
                    self._slots.release()

    @property
    def ready(self) -> int:
        """Paused sandboxes waiting to be acquired."""
        return self._receive.statistics().current_buffer_used

    async def acquire(self) -> Sandbox:
        """A running sandbox: a pooled one resumed (milliseconds) when one is ready, else
        the next one to finish creating. Dead pooled sandboxes are skipped."""
        while True:
            try:
                box = await self._receive.receive()
            except anyio.EndOfStream:
                raise SandboxError(
                    f"the pool cannot create sandboxes: {self._failure}"
                ) from self._failure
            try:
                await box.resume()
                return box
            except SandboxError as e:
                log.warning("pool.discard", id=box.id[:12], error=str(e))
                await box.close()
            except BaseException:  # cancelled while resuming: the caller never got it
                with anyio.CancelScope(shield=True):
                    await box.close()
                raise
            finally:
                # Only now may the refill start creating: a container start takes both
                # cores for a moment, and the caller's resume should not wait behind it.
                self._slots.release()
