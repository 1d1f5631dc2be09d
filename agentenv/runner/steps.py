"""A multi-step task (Harbor's ``[[steps]]``, :class:`~agentenv.tasks.MultiStep`): one
prepared state and one agent sandbox for the whole trial; for each step in order

1. its ``workdir/`` uploaded to the workdir and its ``setup.sh`` run there (as Harbor:
   ``bash <workdir>/setup.sh``, as the agent's user), then its healthcheck;
2. its instruction to the agent in a **new conversation** (Harbor runs a fresh agent per
   step unless a trial asks it to resume; the sandbox and its files carry over, the
   model's context does not);
3. its verification, as the episode lifecycle verifies a Harbor task
   (:func:`~agentenv.runner.episode.finish` then
   :func:`~agentenv.runner.harbor_verdict.harbor_verdict`, where the check's ``mode``
   says: by default a new container of the agent's filesystem as it is after the step, so
   nothing test.sh does there reaches the next step; ``shared`` in the agent's own
   sandbox, whose ``/tests`` and ``/logs/verifier`` are then removed as Harbor does); its
   tests are the task's ``tests/`` with the step's over them;
4. its gate: a reward below its ``min_reward``, a verifier that failed, or a setup that
   failed stops the trial there.

A step's artifacts (the task's, then the step's own: Harbor appends them) are collected
as the step is verified (:func:`~agentenv.runner.episode.finish`) and kept under the
episode's artifacts folder's ``steps/<name>/``.

The task's reward is the mean of the steps run (Harbor's ``mean``, the default) or the
last one's (``final``); each step's verdict is in ``Score.steps``. Unlike Harbor, whose
mean leaves out a step whose verifier crashed, a step that could not be scored makes the
task's score a verifier error (no reward is made of the steps that could)."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import anyio
from pydantic import BaseModel

from agentenv import scratch
from agentenv.agent import policies
from agentenv.agent.loop import new_trajectory, run_episode
from agentenv.agent.policies import ScriptedModel
from agentenv.agent.trajectory import Limits, ToolResultCallback, Trajectory
from agentenv.archive import Archive
from agentenv.errors import TaskError
from agentenv.log import get_logger
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel
from agentenv.runner.artifacts import by_step
from agentenv.runner.episode import Final, Prepared, finish, prepare, release, start_sandbox
from agentenv.runner.harbor_verdict import harbor_verdict, step_check
from agentenv.runner.healthcheck import HealthcheckFailed, wait_healthy
from agentenv.runner.offer import offered
from agentenv.runner.workspace import workspace_tar
from agentenv.sandbox import Sandbox, SandboxError, remove_snapshot
from agentenv.sandbox.errors import ExecUserError
from agentenv.tasks import MultiStep, Task, TaskStep
from agentenv.verify import Score
from agentenv.verify.kinds.harbor import LOGS, TESTS, HarborCheck
from agentenv.verify.score import StepScore

log = get_logger(__name__)

SETUP_TIMEOUT_S = 600.0  # a step's setup.sh


def step_task(task: Task, step: TaskStep, into: Path) -> Task:
    """The task as one step of it runs: the step's instruction, limits, healthcheck and
    verifier (its timeout, its env over the task's), its folder a copy in ``into`` with
    ``tests/`` (the task's, the step's over them, as Harbor merges them in ``/tests``) and
    ``solution/`` (the step's, else the task's)."""
    assert task.folder is not None and isinstance(task.verifier, HarborCheck)
    folder = into / step.name
    for part in ("tests", "solution"):
        sources = [task.folder / part, step.folder / part]
        if part == "solution" and sources[1].is_dir():
            sources = sources[1:]  # the step's own solution replaces the task's
        for source in sources:
            if source.is_dir():
                shutil.copytree(source, folder / part, dirs_exist_ok=True)
    check = task.verifier.model_copy(
        update={
            "timeout_s": step.verifier_timeout_s or task.verifier.timeout_s,
            "env": {**task.verifier.env, **step.verifier_env},
            # collected after the step: the task's, the step's after them (Harbor's)
            "artifacts": [*task.verifier.artifacts, *step.artifacts],
        }
    )
    if step.verifier_environment is not None:
        check = step_check(check, step.verifier_environment, step.verifier_env)
    limits = step_limits(task, step)
    update = {
        "folder": folder,
        "instruction": step.instruction,
        "verifier": check,
        "limits": limits,
        "healthcheck": step.healthcheck,
        "multi_step": None,
    }
    return task.model_copy(update=update)


def steps_oracle(task: Task) -> ScriptedModel:
    """The oracle of a multi-step task: one scripted model for every step, whose turn for a
    step runs that step's ``solution/solve.sh`` (else the task's) and submits, which ends
    that step's conversation, so the next step gets the next turn. As each step begins
    (:func:`begin_step`) its ``solution/`` is put at ``/solution`` by root, as Harbor
    uploads it (:class:`~agentenv.agent.policies.StepsScript`): an image whose ``USER``
    may not write there runs it too."""
    assert task.multi_step is not None
    mine = []
    for step in task.multi_step.steps:
        own = step.folder / "solution"
        view = task.model_copy(update={"folder": step.folder}) if own.is_dir() else task
        mine.append(_oracle_of(view))
    return policies.StepsScript(mine, "oracle")


def _oracle_of(view: Task) -> ScriptedModel:
    """The oracle's turn for ``view``: Harbor's, ``solution/`` laid out at ``/solution``."""
    if view.solution is None:
        raise TaskError(f"task {view.id!r}: a step has no solution/solve.sh for the oracle")
    return policies.oracle(
        view.solution.read_text(),
        files=view.solution_files(),
        solution_dir=policies.HARBOR_SOLUTION_DIR,
        env=view.solution_env,
    )


async def run_steps(
    task: Task,
    model: ChatModel,
    *,
    pause: bool = True,
    on_event: EventCallback | None = None,
    on_tool_result: ToolResultCallback | None = None,
    phases: dict[str, float] | None = None,
    backend: str | None = None,
) -> tuple[Trajectory, Final]:
    """Run the multi-step ``task`` with ``model`` (see the module): the trajectory of every
    step's conversation, one after the other, with the task's score; and the final state
    after the last step run. Every sandbox is removed whatever happens."""
    multi = task.multi_step
    assert multi is not None
    timer = _Timer(phases)
    with timer("prepare"):
        prepared = await prepare(task, backend=backend, steps=True)
    try:
        with timer("create"):
            box = await start_sandbox(prepared)
        try:
            play = partial(
                run_episode, model, pause=pause, on_event=on_event, on_tool_result=on_tool_result
            )
            return await _trial(prepared, multi, box, play, model, timer)
        finally:
            with timer("teardown"), anyio.CancelScope(shield=True):
                await box.close()
    finally:
        with timer("teardown"):
            await release(prepared)


class StepsProgress(BaseModel):
    """Where a multi-step trial is, between the calls of :func:`begin_step` and
    :func:`end_step` (JSON: a suspended RL rollout carries it to another process)."""

    at: int = 0  # the index of the step under way, or next
    begun: bool = False  # its setup ran: its conversation is under way
    over: bool = False  # a step stopped the trial, or the last one was verified
    done: list[StepScore] = []  # each step's verdict, in order
    scores: list[Score | None] = []  # each one's score (None: its setup failed)

    def step(self, multi: MultiStep) -> TaskStep:
        """The step under way (or about to begin)."""
        return multi.steps[self.at]

    def score(self, multi: MultiStep) -> Score:
        """The task's score of the steps run so far (:func:`trial_score`)."""
        return trial_score(list(zip(self.done, self.scores, strict=True)), multi.reward)


def step_limits(task: Task, step: TaskStep) -> Limits:
    """The loop's limits during ``step``: the task's, with the step's own agent timeout."""
    if step.wall_time_s is None:
        return task.limits
    return task.limits.model_copy(update={"wall_time_s": step.wall_time_s})


async def begin_step(
    box: Sandbox, prepared: Prepared, progress: StepsProgress, model: ChatModel | None = None
) -> TaskStep | None:
    """Set up the next step in ``box`` (its workdir, setup.sh, healthcheck) and, for an
    oracle, lay its ``/solution`` out as root: the step, whose conversation may begin, or
    ``None`` when its setup failed (then recorded, and the trial over)."""
    multi = prepared.task.multi_step
    assert multi is not None and not progress.over and not progress.begun
    step = progress.step(multi)
    failed = await _set_up(box, prepared.task, step)
    if failed is not None:
        progress.done.append(
            StepScore(
                name=step.name, reward=0.0, passed=False, error=failed, detail=failed, stopped=True
            )
        )
        progress.scores.append(None)
        progress.over = True
        return None
    if model is not None:
        await policies.lay_out(model, box)  # this step's solution/, by root
    progress.begun = True
    return step


async def end_step(
    box: Sandbox,
    prepared: Prepared,
    progress: StepsProgress,
    phases: dict[str, float] | None = None,
) -> Final:
    """Verify the step under way (its conversation over), record its verdict and gate, and
    move to the next step; the final state it was verified on. ``box`` runs again after."""
    multi = prepared.task.multi_step
    assert multi is not None and progress.begun
    step = progress.step(multi)
    with scratch.folder("steps") as tmp:
        view = prepared.model_copy(update={"task": step_task(prepared.task, step, Path(tmp))})
        final, score = await _verify(box, view, _Timer(phases))
    stop = below(score, step.min_reward)
    progress.done.append(_step_score(step.name, score, stop))
    progress.scores.append(score)
    if stop is not None:
        log.info("steps.stopped", task=prepared.task.id, step=step.name, why=stop)
    progress.at, progress.begun = progress.at + 1, False
    progress.over = stop is not None or progress.at >= len(multi.steps)
    return final


async def _trial(
    prepared: Prepared,
    multi: MultiStep,
    box: Sandbox,
    play: Callable[..., Awaitable[Trajectory]],
    model: ChatModel,
    timer: _Timer,
) -> tuple[Trajectory, Final]:
    """Each step in order until one stops the trial (module docstring); ``play`` is the
    loop with the model and its callbacks, run once per step."""
    trajectories: list[Trajectory] = []
    progress = StepsProgress()
    final: Final | None = None
    taken: list[tuple[str, Archive]] = []  # each step's artifacts
    # one offer for the trial: its MCP servers' sessions across the steps, its skills
    # read once and said after each step's instruction
    async with offered(prepared.task, box) as offer:
        while not progress.over:
            step = await begin_step(box, prepared, progress, model)
            if step is None:
                break
            with timer("loop"):
                trajectories.append(
                    await play(
                        box,
                        offer.told(step.instruction),
                        task_id=prepared.task.id,
                        limits=step_limits(prepared.task, step),
                        tools=offer.tools,
                    )
                )
            final = await end_step(box, prepared, progress, timer.into)
            if final.artifacts is not None:
                taken.append((step.name, final.artifacts))
    traj = joined(trajectories, prepared.task)
    traj.score = progress.score(multi)
    if final is None:  # the first step could not start: its workdir as prepared
        final = Final(workspace=workspace_tar(None, prepared.agent_user), rejected="no step ran")
    if taken:  # the episode's artifacts folder gets each step's under steps/<name>/
        final = final.model_copy(update={"artifacts": by_step(taken)})
    return traj, final


async def _set_up(box: Sandbox, task: Task, step: TaskStep) -> str | None:
    """The step's ``workdir/`` uploaded, its ``setup.sh`` run, its healthcheck passed; why
    not, else ``None``."""
    files = step.folder / "workdir"
    if files.is_dir():
        await box.upload(files, task.workdir)
        if (files / "setup.sh").is_file():
            script = f"{task.workdir.rstrip('/')}/setup.sh"
            ran = await box.exec(["bash", script], timeout=SETUP_TIMEOUT_S, cwd=task.workdir)
            if not ran.ok:
                out = (ran.stdout + ran.stderr).strip()[-1000:]
                return f"step {step.name!r}: setup.sh exited {ran.exit_code}: {out}"
    if task.healthcheck is not None:
        try:
            await wait_healthy(box, task.healthcheck, task_id=task.id, workdir=task.workdir)
        except HealthcheckFailed as e:
            return f"step {step.name!r}: {e}"
    return None


async def _verify(box: Sandbox, view: Prepared, timer: _Timer) -> tuple[Final, Score]:
    """The step's verdict, where its check's mode says; the sandbox running again after."""
    with timer("finish"):
        final = await finish(box, view)  # paused; in shared mode graded and running again
    try:
        with timer("verify"):
            score = await harbor_verdict(view, final)
    finally:
        with anyio.CancelScope(shield=True):
            if final.snapshot is not None:
                try:
                    await remove_snapshot(final.snapshot)
                except SandboxError as e:  # labelled: `agentenv gc` takes it
                    log.warning("steps.snapshot_left", ref=final.snapshot.ref, error=str(e))
    if view.task.verify_in == "agent":
        await _clear_verifier(box)  # as Harbor, before the next step's agent sees them
    else:
        await box.resume()
    return final.model_copy(update={"snapshot": None}), score


async def _clear_verifier(box: Sandbox) -> None:
    """Remove ``/tests`` and ``/logs/verifier`` from the agent's sandbox (shared mode)."""
    command = f"rm -rf {TESTS} {LOGS}"
    try:
        await box.exec(command, timeout=60, user="0:0")
    except ExecUserError:
        await box.exec(command, timeout=60)


def below(score: Score, gate: float | dict[str, float] | None) -> str | None:
    """Why the trial stops after a step with ``score`` (``None`` when it goes on): its
    verifier failed (below any gate), or a reward is below its ``min_reward`` (a number
    gates the reward; a table each named reward, a missing one below any)."""
    if score.error is not None:
        return f"its verifier failed: {score.error[:300]}"
    if gate is None:
        return None
    rewards = {c.name: c.score for c in score.checks} | {"reward": score.reward}
    for key, least in ({"reward": gate} if isinstance(gate, float) else gate).items():
        got = rewards.get(key, -math.inf)
        if got < least:
            return f"{key} = {got:g} is below its min_reward {least:g}"
    return None


def _step_score(name: str, score: Score, stop: str | None) -> StepScore:
    detail = next((c.detail for c in score.checks if c.detail), "")
    if stop is not None:
        detail = f"stopped the task: {stop}\n{detail}"
    return StepScore(
        name=name,
        reward=score.reward,
        passed=score.passed,
        error=score.error,
        detail=detail[:4000],
        stopped=stop is not None,
    )


def trial_score(done: list[tuple[StepScore, Score | None]], strategy: str) -> Score:
    """The task's score of its steps run: the ``mean`` of their rewards or the ``final``
    one's; each step's checks named ``<step>: <check>``; an error when a step's was."""
    steps = [s for s, _ in done]
    if not steps:  # a rollout finished before its first step began
        return Score(reward=0.0, passed=False, error="no step ran")
    checks, suspicious, took = [], [], 0.0
    for step, score in done:
        for c in score.checks if score else []:
            checks.append(c.model_copy(update={"name": f"{step.name}: {c.name}"}))
        suspicious += [f"{step.name}: {s}" for s in (score.suspicious if score else [])]
        took += score.duration_s if score else 0.0
    failed = next((s for s in steps if s.error is not None), None)
    if failed is not None:
        return Score(
            reward=0.0,
            passed=False,
            checks=checks,
            error=f"step {failed.name!r}: {failed.error}",
            duration_s=took,
            suspicious=suspicious,
            steps=steps,
        )
    rewards = [s.reward for s in steps]
    reward = sum(rewards) / len(rewards) if strategy == "mean" else rewards[-1]
    return Score(
        reward=reward,
        passed=reward >= 1.0,
        checks=checks,
        duration_s=took,
        suspicious=suspicious,
        steps=steps,
    )


def joined(trajectories: list[Trajectory], task: Task) -> Trajectory:
    """The steps' conversations as one trajectory, in order (each starts anew)."""
    if not trajectories:
        return new_trajectory(task.instruction, task_id=task.id)
    first, *rest = trajectories
    joined = first.model_copy(deep=True)
    for t in rest:
        joined.messages += t.messages
        joined.turns += t.turns
        joined.stop_reason = t.stop_reason
        joined.reasoning_tokens += t.reasoning_tokens
        joined.retries += t.retries
        joined.wall_s += t.wall_s
        joined.paused_s += t.paused_s
        joined.queued_s += t.queued_s
    return joined


class _Timer:
    """Adds the seconds of named phases to ``phases`` (as the single-step episode does)."""

    def __init__(self, into: dict[str, float] | None):
        self.into = into

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            if self.into is not None:
                self.into[name] = self.into.get(name, 0.0) + time.monotonic() - started


__all__ = [
    "StepsProgress",
    "begin_step",
    "below",
    "end_step",
    "joined",
    "run_steps",
    "step_limits",
    "step_task",
    "steps_oracle",
    "trial_score",
]
