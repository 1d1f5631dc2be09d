"""The RL API: rollouts with rewards, groups forked from one prepared sandbox, a stream of
rollouts in completion order, and partial rollouts that are suspended (sandbox paused, state
as JSON) across a weight update and resumed later, in this process or another.

A *policy* is a :class:`~agentenv.model.types.ChatModel` shared by every episode (an
endpoint client), or a function ``task -> ChatModel`` called once per episode (for policies
with per-episode state, such as the scripted ones).
"""

from __future__ import annotations

import functools
import math
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, nullcontext
from typing import Any

import anyio
from pydantic import BaseModel

from agentenv.agent import policies
from agentenv.agent.loop import limit_reached, new_trajectory, take_turn
from agentenv.agent.trajectory import Limits, StopReason, Trajectory
from agentenv.harnesses.base import Harness
from agentenv.harnesses.install import harness_image
from agentenv.log import get_logger
from agentenv.model.types import ChatModel
from agentenv.rl.harness_rollout import HarnessRollout, HarnessState, new_gateway_dir
from agentenv.runner.episode import (
    CheckerAhead,
    Episode,
    Prepared,
    checker_ahead,
    episode,
    play_episode,
    prepare,
    release,
    start_sandbox,
)
from agentenv.runner.harness import Agent, HarnessBox, refuse_task, resolve_agent
from agentenv.runner.offer import Offer, offered, skills_of
from agentenv.runner.outcomes import classify
from agentenv.runner.steps import StepsProgress, begin_step, end_step, joined, step_limits
from agentenv.sandbox import (
    Sandbox,
    SandboxPool,
    SandboxSpec,
    attach,
    recycling,
)
from agentenv.tasks import Task

log = get_logger(__name__)

Policy = ChatModel | Callable[[Task], ChatModel]


def model_for(policy: Policy, task: Task) -> ChatModel:
    """The chat model of one episode of ``task``."""
    return policy if hasattr(policy, "complete") else policy(task)


async def _episode(
    prepared: Prepared,
    policy: Policy,
    limits: Limits | None,
    policy_version: int | str | None,
    *,
    pool: SandboxPool | None = None,
    harness: Harness | None = None,
    pause: bool = True,
) -> Trajectory:
    """One episode from a prepared state; its failure is in the trajectory, not raised (one
    episode never takes down its group or stream). Cancellation still propagates."""
    task = prepared.task
    if harness is not None:
        return await _harness_episode(prepared, policy, limits, policy_version, harness, pause)
    rollout: Rollout | None = None
    try:
        model = model_for(policy, task)
        if pool is not None:
            box = await pool.acquire()
            try:
                await box.upload_tar(prepared.workspace, task.workdir)
            except BaseException:
                await box.close()
                raise
        else:
            box = await start_sandbox(prepared)
        rollout = Rollout(prepared, model, box, limits=limits, version=policy_version, pause=pause)
        return await rollout.run()
    except Exception as e:
        log.warning("rollout.failed", task=task.id, error=f"{type(e).__name__}: {e}")
        traj = rollout.so_far() if rollout is not None else None
        traj = traj or new_trajectory(task.instruction, task_id=task.id)
        traj.error = f"{classify(e)}: {type(e).__name__}: {e}"
        return traj


async def _harness_episode(
    prepared: Prepared,
    policy: Policy,
    limits: Limits | None,
    policy_version: int | str | None,
    harness: Harness,
    pause: bool = True,
) -> Trajectory:
    """One episode played by ``harness`` (:mod:`agentenv.runner.harness`) through the
    episode lifecycle; its failure is in the trajectory (with the turns taken), not raised."""
    task = prepared.task
    traj = new_trajectory(task.instruction, task_id=task.id)
    try:
        model = model_for(policy, task)
        async with episode(prepared, harness=harness) as ep:
            traj = await play_episode(
                ep, model, limits=limits, policy_version=policy_version, into=traj, pause=pause
            )
            _, traj.score = await ep.conclude()
        return traj
    except Exception as e:
        log.warning("rollout.failed", task=task.id, error=f"{type(e).__name__}: {e}")
        traj.error = f"{classify(e)}: {type(e).__name__}: {e}"
        return traj


def _harness_for(task: Task, agent: Agent, pool: SandboxPool | None = None) -> Harness | None:
    """The harness ``agent`` names, refused here (raised, as a caller's mistake) when it
    cannot play ``task`` or comes with a ``pool`` (of the built-in loop's sandboxes)."""
    harness = resolve_agent(agent)
    if harness is not None:
        refuse_task(task, harness)
        if pool is not None:
            raise ValueError(
                f"a pool's sandboxes are the built-in loop's: the agent {harness.name!r} "
                "needs its own (leave pool out)"
            )
    return harness


async def rollout(
    task: Task,
    policy: Policy,
    *,
    limits: Limits | None = None,
    pool: SandboxPool | None = None,
    policy_version: int | str | None = None,
    backend: str | None = None,
    agent: Agent = None,
    pause: bool = True,
) -> Trajectory:
    """One episode of ``task`` through the episode lifecycle (prepare, setup, the loop,
    finish, verification in a new checker sandbox); the returned trajectory has ``score``
    and ``reward`` filled in, or ``error`` set if the infrastructure failed under it.
    ``pool`` must hold sandboxes made with :func:`~agentenv.runner.episode.agent_spec`.
    Its sandboxes are ``backend``'s (see :mod:`agentenv.sandbox.backend`).

    ``agent`` plays it: the built-in loop (``None``) or a harness, by name or value (see
    :mod:`agentenv.runner.harness`: its model calls go through a gateway that freezes the
    sandbox and records each turn; the trajectory's ``harness`` says how it ran). An
    unknown name, a multi-step task or a ``pool`` with a harness is raised, not returned.
    ``pause=False`` leaves the sandbox running while the model thinks (to measure what
    the freeze saves)."""
    harness = _harness_for(task, agent, pool)
    try:
        prepared = await prepare(task, backend=pool.spec.backend if pool else backend, steps=True)
    except Exception as e:
        traj = new_trajectory(task.instruction, task_id=task.id)
        traj.error = f"{classify(e)}: {type(e).__name__}: {e}"
        return traj
    try:
        return await _episode(
            prepared, policy, limits, policy_version, pool=pool, harness=harness, pause=pause
        )
    finally:
        await release(prepared)


def set_advantages(group: Sequence[Trajectory], eps: float = 1e-6) -> None:
    """Group-relative advantages: ``(r - mean) / (std + eps)`` and ``r - mean``, over the
    trajectories with a valid reward (the others get ``None``)."""
    rewards = [t.reward for t in group if t.reward is not None]
    if not rewards:
        return
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    for t in group:
        if t.reward is not None:
            t.advantage_centered = t.reward - mean
            t.advantage = (t.reward - mean) / (std + eps)


class GroupTimings(BaseModel):
    """Where a group's time went. With a shared setup, ``setup_s`` covers preparing one
    sandbox, its setup, the snapshot and the fork; without, each episode prepares its own
    sandbox and that time is in ``episodes_s``."""

    setup_s: float
    episodes_s: float
    shared_setup: bool


async def rollout_group(
    task: Task,
    policy: Policy,
    n: int,
    *,
    share_setup: bool = True,
    limits: Limits | None = None,
    policy_version: int | str | None = None,
    timings: list[GroupTimings] | None = None,
    backend: str | None = None,
    agent: Agent = None,
    pause: bool = True,
) -> list[Trajectory]:
    """``n`` episodes of ``task`` run concurrently, with group-relative advantages. With
    ``share_setup`` the workspace and setup are prepared once, snapshotted, and the n
    sandboxes (and their checker sandboxes) started from it; otherwise each episode
    prepares its own. A failed episode comes back with ``error`` set and no advantage.
    ``agent``: who plays each episode, and ``pause``, as for :func:`rollout`."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    harness = _harness_for(task, agent)
    group_id = uuid.uuid4().hex[:12]
    t0 = time.monotonic()
    shared = await prepare(task, share=True, backend=backend, steps=True) if share_setup else None
    setup_s = time.monotonic() - t0
    out: list[Trajectory | None] = [None] * n

    async def one(i: int) -> None:
        if shared is not None:
            out[i] = await _episode(
                shared, policy, limits, policy_version, harness=harness, pause=pause
            )
        else:
            out[i] = await rollout(
                task,
                policy,
                limits=limits,
                policy_version=policy_version,
                backend=backend,
                agent=harness,
                pause=pause,
            )

    t1 = time.monotonic()
    try:
        async with recycling(), anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    finally:
        if shared is not None:
            await release(shared)  # even when the group is cancelled
    group = [t for t in out if t is not None]
    for t in group:
        t.group_id = group_id
    set_advantages(group)
    if timings is not None:
        timings.append(
            GroupTimings(
                setup_s=setup_s, episodes_s=time.monotonic() - t1, shared_setup=share_setup
            )
        )
    return group


async def stream(
    tasks: Sequence[Task],
    policy: Policy,
    *,
    n: int = 1,
    concurrency: int = 8,
    limits: Limits | None = None,
    policy_version: int | str | None = None,
    backend: str | None = None,
    agent: Agent = None,
    pause: bool = True,
) -> AsyncIterator[Trajectory]:
    """Rollouts of every task ``n`` times, yielded as they finish. Back-pressure: a finished
    rollout waits (holding its concurrency slot) until the consumer takes it. ``agent``:
    who plays each, as for :func:`rollout` (checked against every task before any runs);
    ``pause`` too."""
    harness = resolve_agent(agent)
    if harness is not None:
        for task in tasks:
            refuse_task(task, harness)
    send, receive = anyio.create_memory_object_stream[Trajectory](0)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(task: Task) -> None:
        async with limiter:
            traj = await rollout(
                task,
                policy,
                limits=limits,
                policy_version=policy_version,
                backend=backend,
                agent=harness,
                pause=pause,
            )
            await send.send(traj)

    async def produce() -> None:
        # recycling in this task and the rollouts it starts (not in the consumer's)
        async with send, recycling(), anyio.create_task_group() as inner:
            for task in tasks:
                for _ in range(n):
                    inner.start_soon(one, task)

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        async with receive:
            async for traj in receive:
                try:
                    yield traj
                except GeneratorExit:
                    # the consumer stopped early (aclose): cancel the rest, remove their
                    # sandboxes, and end quietly rather than as an exception group
                    tg.cancel_scope.cancel()
                    break


class SuspendedRollout(BaseModel):
    """A partial rollout at rest: JSON-serialisable, its sandbox paused (using no CPU) and
    able to outlive this process until its TTL; it carries its prepared state, from which
    its checker sandbox will be made. A multi-step task's carries where its trial is
    (``steps``), the conversations of the steps done (``parts``) and the caller's limits
    (``given_limits``, over each step's own); its ``trajectory`` is the current step's.
    ``skills`` is the block naming the task's skills, said after each instruction, as read
    when the rollout first opened its offer (``None``: not yet); a resume does not read the
    sandbox's skills again."""

    prepared: Prepared
    trajectory: Trajectory
    sandbox_id: str
    sandbox_spec: SandboxSpec
    limits: Limits
    elapsed_s: float
    policy_version: int | str | None = None
    steps: StepsProgress | None = None
    parts: list[Trajectory] = []
    given_limits: Limits | None = None
    skills: str | None = None
    harness: HarnessState | None = None  # a rollout a harness plays (agent=): its state

    @property
    def task(self) -> Task:
        """The rollout's task."""
        return self.prepared.task


class Rollout:
    """A rollout run turn by turn: :meth:`step`, :meth:`suspend`, :meth:`finish`.

    A multi-step task (Harbor's ``[[steps]]``) runs its trial here through the same step
    machinery as :func:`~agentenv.runner.episode.run_task`
    (:func:`~agentenv.runner.steps.begin_step`, :func:`~agentenv.runner.steps.end_step`):
    the first turn sets up the first step; a turn that ends a step's conversation verifies
    that step, applies its ``min_reward`` gate and sets up the next, whose instruction opens
    a new conversation (:attr:`trajectory`, with the step's limits); :meth:`finish` returns
    every step's conversation as one trajectory with the trial's score (mean or final,
    each step's in ``score.steps``).

    What the model is offered and told comes from :func:`~agentenv.runner.offer.offered`,
    as in ``run_task``: the task's tools and its MCP servers', opened on the first turn
    after :func:`start` or :func:`resume` and closed by :meth:`suspend` and :meth:`finish`
    (so in the task that steps the rollout: the sessions are anyio's); a stdio server's
    process is the one of that stretch, a resumed rollout starts a new one. The skills
    block is read once, on the first turn, and goes after each instruction (the first
    conversation's is rewritten then, as it has no turn yet)."""

    def __init__(
        self,
        prepared: Prepared,
        model: ChatModel,
        box: Sandbox,
        *,
        limits: Limits | None = None,
        version: int | str | None = None,
        trajectory: Trajectory | None = None,
        elapsed_s: float = 0.0,
        steps: StepsProgress | None = None,
        parts: list[Trajectory] | None = None,
        skills: str | None = None,
        pause: bool = True,
    ):
        self.prepared = prepared
        self.pause = pause  # frozen while the model thinks
        self.task = prepared.task
        self.model = model
        self.box = box
        self.given_limits = limits  # over each step's own, for a multi-step task
        multi = self.task.multi_step
        self.steps = steps if steps is not None or multi is None else StepsProgress()
        self.parts = parts or []  # a multi-step task's conversations of the steps done
        self.limits = limits or self._step_limits()
        self.version = version  # stamped on every turn this handle takes
        instruction = self.task.instruction
        if multi is not None and self.steps is not None and not self.steps.over:
            instruction = self.steps.step(multi).instruction
        self.trajectory = trajectory or new_trajectory(instruction, task_id=self.task.id)
        self.elapsed_s = elapsed_s
        self.stop_reason: StopReason | None = self.trajectory.stop_reason
        self.skills = skills  # the block said after each instruction, once read
        self._offer: Offer | None = None  # open between the first turn and suspend/finish
        self._offering = AsyncExitStack()

    def _step_limits(self) -> Limits:
        """The limits of the conversation under way (the step's, for a multi-step task)."""
        multi = self.task.multi_step
        if multi is None or self.steps is None or self.steps.over:
            return self.task.limits
        return step_limits(self.task, self.steps.step(multi))

    @property
    def done(self) -> bool:
        """Whether the episode has ended (submitted, no tool call, or a limit; for a
        multi-step task, its trial: a step stopped it, or the last one was verified)."""
        if self.steps is not None:
            return self.steps.over
        return self.stop_reason is not None

    def so_far(self) -> Trajectory:
        """The rollout's trajectory as it is: a multi-step task's every conversation."""
        if self.steps is None:
            return self.trajectory
        ended = bool(self.parts) and self.parts[-1] is self.trajectory
        return joined(self.parts if ended else [*self.parts, self.trajectory], self.task)

    async def step(self) -> bool:
        """Take one turn (a multi-step task's step set up first, or verified after);
        returns :attr:`done`."""
        if self.done:
            return True
        await self._open()
        if self.steps is not None and not self.steps.begun and not await self._begin_step():
            return self.done  # its setup failed: the trial is over
        if self.steps is None and not self.trajectory.turns:  # the oracle's /solution, by root
            await self.box.resume()  # a rollout suspended before its first turn is frozen
            await policies.lay_out(self.model, self.box)
        await self._turn()
        if self.stop_reason is not None and self.steps is not None:
            await self._end_step()
        return self.done

    async def offer(self) -> Offer:
        """What the model is offered (the tools, the skills said in the instruction),
        opened now if it is not; the sandbox is thawed for it."""
        return await self._open()

    async def close(self) -> None:
        """Abandon the rollout: close the MCP sessions and remove the sandbox (no verdict;
        the prepared state is the caller's to release)."""
        try:
            await self._close()
        finally:
            with anyio.CancelScope(shield=True):
                await self.box.close()

    async def _open(self) -> Offer:
        """What the model is offered (opened now if it is not), the skills read the first
        time and said in the conversation not begun."""
        if self._offer is not None:
            return self._offer
        await self.box.resume()  # a resumed rollout's sandbox is frozen; servers start in it
        offer = await self._offering.enter_async_context(
            offered(self.task, self.box, skills=self.skills)
        )
        self._offer = offer
        if self.skills is None:
            self.skills = offer.skills
            if not self.trajectory.turns:  # its opening said without the skills
                opening = self.trajectory.messages[1]["content"]
                self.trajectory = new_trajectory(offer.told(opening), task_id=self.task.id)
        return offer

    async def _close(self) -> None:
        """Close the offer's MCP sessions (a stdio server's process ends)."""
        self._offer = None
        # not shielded here: a stdio server's task group must end in the scope it began in
        await self._offering.aclose()

    async def _begin_step(self) -> bool:
        """Set up the step to begin (an oracle's solution laid out); whether it could be."""
        assert self.steps is not None
        await self.box.resume()  # a resumed rollout's sandbox is still frozen
        return await begin_step(self.box, self.prepared, self.steps, self.model) is not None

    async def _end_step(self) -> None:
        """The step's conversation is over: verify the step, then open the next one's."""
        assert self.steps is not None and self.task.multi_step is not None
        await self.box.resume()  # frozen when resumed and finished at once
        await end_step(self.box, self.prepared, self.steps)
        self.parts.append(self.trajectory)
        if self.steps.over:
            return
        step = self.steps.step(self.task.multi_step)
        told = step.instruction + (self.skills or "")  # as the offer tells it
        self.trajectory = new_trajectory(told, task_id=self.task.id)
        self.limits = self.given_limits or self._step_limits()
        self.elapsed_s, self.stop_reason = 0.0, None

    async def _turn(self) -> None:
        started = time.monotonic()
        try:
            reason = limit_reached(self.trajectory, self.limits, self.elapsed_s)
            if reason is None:
                reason = await take_turn(
                    self.model,
                    self.box,
                    self.trajectory,
                    tools=(await self._open()).tools,
                    policy_version=self.version,
                    pause=self.pause,
                )
            if reason is None:
                reason = limit_reached(self.trajectory, self.limits, self.elapsed_s)
        finally:
            self.elapsed_s += time.monotonic() - started
            self.trajectory.wall_s = self.elapsed_s
        self.stop_reason = self.trajectory.stop_reason = reason

    async def suspend(self) -> SuspendedRollout:
        """Close the MCP sessions, pause the sandbox and let go of it; the returned state
        resumes with :func:`resume`."""
        await self._close()
        await self.box.pause()
        state = SuspendedRollout(
            prepared=self.prepared,
            trajectory=self.trajectory,
            sandbox_id=self.box.id,
            sandbox_spec=self.box.spec,
            limits=self.limits,
            elapsed_s=self.elapsed_s,
            policy_version=self.version,
            steps=self.steps,
            parts=self.parts,
            given_limits=self.given_limits,
            skills=self.skills,
        )
        self.box.detach()
        return state

    async def finish(self, *, ahead: CheckerAhead | None = None) -> Trajectory:
        """Take the final workspace, remove the sandbox, and verify it in a new checker
        sandbox (the one made ``ahead``, if given), filling in the reward. A multi-step
        task's step under way is verified (the steps not begun do not count, as those a gate
        skipped), its sandbox removed, and the trial's trajectory and score returned. The
        MCP sessions are closed first."""
        await self._close()
        if self.steps is not None:
            return await self._finish_steps()
        # a sandbox made to outlive this process is not kept for another episode
        reusable = self.prepared.recyclable and not self.box.spec.outlive_owner
        ep = Episode(self.prepared, self.box, ahead=ahead, reusable=reusable)
        _, self.trajectory.score = await ep.conclude()
        return self.trajectory

    async def _finish_steps(self) -> Trajectory:
        assert self.steps is not None and self.task.multi_step is not None
        try:
            if self.steps.begun:  # stopped by the caller in the middle of a step
                await self._end_step()
        finally:
            with anyio.CancelScope(shield=True):
                await self.box.close()  # never recycled: its steps changed it
        self.trajectory = joined(self.parts, self.task)
        self.trajectory.score = self.steps.score(self.task.multi_step)
        return self.trajectory

    async def run(self) -> Trajectory:
        """Step until done, then :meth:`finish`, with the checker sandbox made while the
        agent works. The sandbox is removed whatever happens."""
        # a multi-step task's steps are verified as they end (no checker made ahead)
        made = checker_ahead(self.prepared) if self.steps is None else nullcontext(None)
        async with made as ahead:
            try:
                while not await self.step():
                    pass
            except BaseException:
                await self._close()
                await self.box.close()
                raise
            return await self.finish(ahead=ahead)


async def start(
    task: Task,
    policy: Policy,
    *,
    limits: Limits | None = None,
    version: int | str | None = None,
    backend: str | None = None,
    agent: Agent = None,
    outlive: bool = True,
) -> Rollout | HarnessRollout:
    """A partial rollout, ready to :meth:`~Rollout.step`. Its sandbox (and its prepared
    snapshot, if the task has a setup) may outlive this process once suspended: only their
    TTL lets ``agentenv gc`` remove them. With ``outlive=False`` (a rollout that is never
    suspended) they are this process's: ``gc`` collects them as soon as it is gone.

    With ``agent`` (a harness), a :class:`~agentenv.rl.harness_rollout.HarnessRollout`:
    each step lets the harness make one model call; suspended, it waits on the next one
    with its sandbox frozen, and resumes in any process on this host."""
    harness = _harness_for(task, agent)
    keep_s = SandboxSpec().ttl_s if task.setup and outlive else None
    prepared = await prepare(task, keep_s=keep_s, backend=backend, steps=True)
    if harness is not None:
        try:
            return await _start_harness(prepared, model_for(policy, task), harness, limits, version)
        except BaseException:
            await release(prepared)
            raise
    try:
        box = await start_sandbox(prepared, outlive_owner=outlive)
    except BaseException:
        await release(prepared)
        raise
    return Rollout(prepared, model_for(policy, task), box, limits=limits, version=version)


async def _start_harness(
    prepared: Prepared,
    model: ChatModel,
    harness: Harness,
    limits: Limits | None,
    version: int | str | None,
) -> HarnessRollout:
    """A partial rollout of ``harness``: its image, a gateway folder that outlives this
    process, and its sandbox (never recycled)."""
    task = prepared.task
    image = await harness_image(prepared.image, harness, backend=prepared.backend)
    folder = new_gateway_dir()
    try:
        box = await start_sandbox(
            prepared,
            outlive_owner=True,
            harness=HarnessBox(harness=harness, image=image, gateway_dir=folder),
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        told = task.instruction + await skills_of(task, box)
    except BaseException:
        await box.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return HarnessRollout(
        prepared,
        model,
        box,
        harness,
        gateway_dir=folder,
        instruction=told,
        limits=limits,
        version=version,
        trajectory=new_trajectory(told, task_id=task.id),
    )


async def resume(
    state: SuspendedRollout, policy: Policy, *, version: int | str | None = None
) -> Rollout | HarnessRollout:
    """Continue a suspended rollout (from any process on the same sandbox host) with
    ``policy``; the turns it takes are stamped with ``version``. A harness's resumes on a
    new gateway at the same socket: its cut call is sent again, to ``policy``."""
    box = await attach(state.sandbox_id, state.sandbox_spec)
    if state.harness is not None:
        h = state.harness
        harness = resolve_agent(h.agent)
        assert harness is not None, "a harness's name resolves to a harness"
        return HarnessRollout(
            state.prepared,
            model_for(policy, state.task),
            box,
            harness,
            gateway_dir=h.gateway_dir,
            instruction=h.instruction,
            limits=state.limits,
            version=version,
            trajectory=state.trajectory,
            token=h.token,
            handle=h.process(),
            elapsed_s=state.elapsed_s,
        )
    return Rollout(
        state.prepared,
        model_for(policy, state.task),
        box,
        limits=state.limits if state.steps is None else state.given_limits,
        version=version,
        trajectory=state.trajectory,
        elapsed_s=state.elapsed_s,
        steps=state.steps,
        parts=state.parts,
        skills=state.skills,
    )


def rollout_sync(task: Task, policy: Policy, **kwargs: Any) -> Trajectory:
    """:func:`rollout` for code without an event loop."""
    return anyio.run(functools.partial(rollout, task, policy, **kwargs))


def rollout_group_sync(task: Task, policy: Policy, n: int, **kwargs: Any) -> list[Trajectory]:
    """:func:`rollout_group` for code without an event loop."""
    return anyio.run(functools.partial(rollout_group, task, policy, n, **kwargs))


__all__ = [
    "GroupTimings",
    "HarnessRollout",
    "Policy",
    "Rollout",
    "SuspendedRollout",
    "resume",
    "rollout",
    "rollout_group",
    "rollout_group_sync",
    "rollout_sync",
    "set_advantages",
    "start",
    "stream",
]
