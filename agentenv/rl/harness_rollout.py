"""Partial rollouts played by a harness: suspended while the harness waits on a model call
(its sandbox frozen), resumed later, in this process or another.

A harness runs in its sandbox on its own, detached from the process that started it
(:mod:`agentenv.guest.forward`), and calls the model through the episode's gateway. Here the
gateway's model is behind a *gate*: a call that arrives waits for a permit, with the sandbox
frozen by the gateway meanwhile. :meth:`HarnessRollout.step` gives one permit and returns
once the harness waits at the gate again (one model call answered and the harness's work
after it done) or has ended. :meth:`HarnessRollout.suspend` then keeps the sandbox frozen,
closes the gateway (the waiting call's connection is cut, unanswered, nothing recorded) and
lets go of the sandbox: the state (the trajectory so far, the gateway's folder and token,
the harness's handle) is JSON. :func:`resume_harness` attaches to the sandbox, opens a new
gateway on the *same* socket path with the same token and thaws the sandbox: the harness's
client finds its call cut and sends it again, to the new gateway, whose model is the new
policy's.

The gateway's folder of a partial rollout is not a temporary folder of this process (a
suspended rollout outlives it): it is under :data:`GATEWAY_ROOT`, named by the rollout, and
removed when the rollout finishes.
"""

from __future__ import annotations

import math
import secrets
import shutil
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.abc import TaskGroup
from pydantic import BaseModel

from agentenv.agent.trajectory import Limits, Trajectory
from agentenv.gateway.session import Gateway, open_gateway
from agentenv.harnesses.base import Harness
from agentenv.harnesses.run import HarnessProcess, join_harness, start_harness
from agentenv.log import get_logger
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel, Completion
from agentenv.runner.episode import Episode, Prepared
from agentenv.runner.harness import stop_reason, timeout_of
from agentenv.sandbox import Sandbox

if TYPE_CHECKING:
    from agentenv.rl.rollout import SuspendedRollout

log = get_logger(__name__)

GATEWAY_ROOT = Path("/tmp/agentenv-gateways")
"""Where partial rollouts' gateway folders are: short (a Unix socket's path has 107 bytes),
and not named like this process's temporary files (``agentenv gc`` would take them while
the rollout is suspended)."""


def new_gateway_dir() -> Path:
    """A new gateway folder for a partial rollout (mode 0755: the sandbox's user reaches
    the socket in it)."""
    GATEWAY_ROOT.mkdir(mode=0o755, exist_ok=True)
    folder = GATEWAY_ROOT / secrets.token_hex(6)
    folder.mkdir(mode=0o755)
    return folder


class HarnessState(BaseModel):
    """What a suspended harness rollout carries beyond the built-in loop's state: which
    harness, its handle in the sandbox (to re-join it), the gateway's folder and token (the
    running harness calls that socket with that token), and the instruction it was given."""

    agent: str
    handle: HarnessProcess | None = None  # None: not started yet
    gateway_dir: Path
    token: str | None = None
    instruction: str
    suspended_at: float = 0.0  # time.time(): the harness's timeout does not count the rest

    def process(self) -> HarnessProcess | None:
        """The harness's process as a resume re-joins it: its start moved on by the time
        spent suspended (its timeout counts the time it could run, as the built-in loop's
        wall time counts only its steps)."""
        if self.handle is None:
            return None
        rested = max(0.0, time.time() - self.suspended_at) if self.suspended_at else 0.0
        return self.handle.model_copy(update={"started": self.handle.started + rested})


class _Gate:
    """The episode's model behind a gate: each call waits for a permit first. The gateway
    has frozen the sandbox before it asks, so a call held here holds the harness frozen."""

    def __init__(self, model: ChatModel):
        self._inner = model
        self.model = str(getattr(model, "model", "") or "kimi-k3")  # what the gateway lists
        self._send, self._receive = anyio.create_memory_object_stream[None](math.inf)
        self.waiting = 0  # calls held at the gate
        self.answered = 0  # calls answered since the gate was made
        self._changed = anyio.Event()

    def notify(self) -> None:
        """Wake whoever waits in :meth:`changed`."""
        self._changed.set()
        self._changed = anyio.Event()

    async def changed(self) -> None:
        """Wait for the next change (a call held, a call answered, the harness ended)."""
        await self._changed.wait()

    def permit(self) -> None:
        """Let one call through (the one held, or the next to arrive)."""
        self._send.send_nowait(None)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> Completion:
        """The model's answer, once a permit lets the call through."""
        self.waiting += 1
        self.notify()
        try:
            await self._receive.receive()
        finally:
            self.waiting -= 1
        done = await self._inner.complete(messages, tools, on_event=on_event)
        self.answered += 1
        self.notify()
        return done


class _Held:
    """The sandbox as the gateway sees it: its thaw is skipped once the rollout suspends
    (the call the gateway froze it for is cut, and the sandbox must stay frozen)."""

    def __init__(self, box: Sandbox):
        self.box = box
        self.hold = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.box, name)

    async def pause(self) -> None:
        """Freeze the sandbox."""
        await self.box.pause()

    async def resume(self) -> None:
        """Thaw it, unless the rollout is suspending."""
        if not self.hold:
            await self.box.resume()


class HarnessRollout:
    """A partial rollout played by a harness: :meth:`step`, :meth:`suspend`, :meth:`finish`
    (see the module's docstring). Made by :func:`~agentenv.rl.rollout.start` with
    ``agent=``, or by :func:`~agentenv.rl.rollout.resume` of such a rollout's state."""

    def __init__(
        self,
        prepared: Prepared,
        model: ChatModel,
        box: Sandbox,
        harness: Harness,
        *,
        gateway_dir: Path,
        instruction: str,
        limits: Limits | None = None,
        version: int | str | None = None,
        trajectory: Trajectory,
        token: str | None = None,
        handle: HarnessProcess | None = None,
        elapsed_s: float = 0.0,
    ):
        self.prepared = prepared
        self.task = prepared.task
        self.box = box
        self.harness = harness
        self.gateway_dir = gateway_dir
        self.instruction = instruction
        self.limits = limits or self.task.limits
        self.version = version
        self.trajectory = trajectory
        self.token = token
        self.handle = handle
        self.elapsed_s = elapsed_s  # of the harness's run, over every process
        self._gate = _Gate(model)
        self._held = _Held(box)
        self._stack: AsyncExitStack | None = None
        self._group: TaskGroup | None = None
        self._gateway: Gateway | None = None
        self._opened = 0.0
        self._failure: Exception | None = None  # watching the harness failed
        self.ended = trajectory.harness is not None  # the harness's run is over

    @property
    def done(self) -> bool:
        """Whether the harness has ended (by itself, stopped by a budget or its timeout)."""
        return self.ended

    def so_far(self) -> Trajectory:
        """The trajectory as it is."""
        return self.trajectory

    async def _open(self) -> None:
        """Open the gateway, start the harness (or, resumed, thaw it to call again) and
        watch for its end."""
        if self._stack is not None:
            return
        stack = AsyncExitStack()
        try:
            gateway = await stack.enter_async_context(
                open_gateway(
                    self._gate,
                    self.trajectory,
                    socket_dir=self.gateway_dir,
                    sandbox=cast(Sandbox, self._held),
                    limits=self.limits,
                    policy_version=self.version,
                    token=self.token,  # a resumed one's: the running harness has it
                )
            )
            self.token = gateway.token
            group = await stack.enter_async_context(anyio.create_task_group())
            await self.box.resume()  # frozen while suspended; its harness then calls again
            if self.handle is None:
                self.handle = await start_harness(
                    self.box, self.harness, self.instruction, gateway, model=gateway.model_name
                )
            # at once: its wait starts while the sandbox runs (the harness's next call,
            # held at the gate, freezes it)
            group.start_soon(self._join, gateway)
        except BaseException:
            await stack.aclose()
            raise
        self._stack, self._group, self._gateway = stack, group, gateway
        self._opened = time.monotonic()

    async def _join(self, gateway: Gateway) -> None:
        """Wait for the harness to end (cancelled by a suspend, which leaves it running).
        A failure to watch it (the sandbox lost) ends the rollout, raised by :meth:`step`."""
        assert self.handle is not None
        try:
            run = await join_harness(
                self.box, self.handle, gateway, timeout_s=timeout_of(self.limits)
            )
        except Exception as e:
            self._failure = e
        else:
            self.trajectory.harness = run
            self.trajectory.stop_reason = stop_reason(gateway, run.stopped)
        self.ended = True
        self._gate.notify()

    async def _close(self, *, hold: bool) -> None:
        """Close the gateway and stop watching the harness; with ``hold`` the sandbox stays
        frozen (a suspend), else the gateway thaws it."""
        stack, group = self._stack, self._group
        if stack is None or group is None:
            return
        self._stack = self._group = self._gateway = None
        self._held.hold = hold
        if hold:
            await self.box.pause()  # frozen before the gateway lets go of its call
        group.cancel_scope.cancel()
        await stack.aclose()
        self.elapsed_s += time.monotonic() - self._opened
        self.trajectory.wall_s = self.elapsed_s

    async def step(self) -> bool:
        """Let the harness make one model call, and return once it waits on the next one
        (frozen) or has ended; returns :attr:`done`."""
        if self.done:
            return True
        await self._open()
        before = self._gate.answered
        self._gate.permit()
        while not self.ended and not (self._gate.answered > before and self._gate.waiting):
            await self._gate.changed()
        error = self._failure or (self._gateway.error if self._gateway is not None else None)
        if error is not None:  # the endpoint or the sandbox failed for good
            await self._close(hold=False)
            raise error
        return self.done

    async def suspend(self) -> SuspendedRollout:
        """Keep the sandbox frozen, close the gateway (the call waiting is cut, unanswered)
        and let go of the sandbox; the state resumes with :func:`~agentenv.rl.rollout.resume`
        (which opens a new gateway on the same socket, with the same token)."""
        from agentenv.rl.rollout import SuspendedRollout  # it names this module's state

        await self._close(hold=True)
        await self.box.pause()  # not started yet, or ended: frozen all the same
        state = SuspendedRollout(
            prepared=self.prepared,
            trajectory=self.trajectory,
            sandbox_id=self.box.id,
            sandbox_spec=self.box.spec,
            limits=self.limits,
            elapsed_s=self.elapsed_s,
            policy_version=self.version,
            harness=HarnessState(
                agent=self.harness.name,
                handle=self.handle,
                gateway_dir=self.gateway_dir,
                token=self.token,
                instruction=self.instruction,
                suspended_at=time.time(),
            ),
        )
        self.box.detach()
        return state

    async def finish(self, *, ahead: Any = None) -> Trajectory:
        """Take the final workspace and verify it as the built-in loop's (the sandbox never
        recycled); the gateway's folder goes. A harness still running is frozen where it
        is and removed with its sandbox: the episode is graded as it stands (its
        trajectory then has no :class:`~agentenv.agent.trajectory.HarnessRun`, as a
        built-in rollout finished early has no stop reason)."""
        try:
            await self._close(hold=not self.ended)
            ep = Episode(self.prepared, self.box, ahead=ahead, reusable=False)
            _, self.trajectory.score = await ep.conclude()
            return self.trajectory
        finally:
            shutil.rmtree(self.gateway_dir, ignore_errors=True)

    async def run(self) -> Trajectory:
        """Step until done, then :meth:`finish`. The sandbox is removed whatever happens."""
        try:
            while not await self.step():
                pass
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._close(hold=False)
                await self.box.close()
                shutil.rmtree(self.gateway_dir, ignore_errors=True)
            raise
        return await self.finish()


__all__ = ["GATEWAY_ROOT", "HarnessRollout", "HarnessState", "new_gateway_dir"]
