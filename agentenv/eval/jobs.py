"""Eval jobs: tasks × samples with a policy, each episode verified, every result durable.

The job folder holds ``config.json`` (what the job is), ``results.jsonl`` (one fsynced line
per finished episode: the truth a re-run resumes from), ``trajectories/<task>/<sample>.json``
(written before its result line) and ``summary.json``. Running the same job on the same
folder again runs only the episodes without a result line (or whose line is an
infrastructure error the outcome table retries), after removing the containers
and images that its killed runs left behind (everything a job makes is labelled with it).
With a budget (``max_cost_usd``) no episode starts once the job has spent it; the job then
resumes with a higher one.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from pydantic import BaseModel

from agentenv import scratch
from agentenv.agent.loop import Trajectory
from agentenv.archive import Archive
from agentenv.errors import JobStopped
from agentenv.eval.online import needs_internet, no_internet_reason, unreachable
from agentenv.eval.summary import Row, summarize
from agentenv.formats import RefusedTask, load_runnable
from agentenv.log import get_logger
from agentenv.runner.budget import Budget, with_earlier_spend
from agentenv.runner.episode import Final, regrade_final
from agentenv.runner.harness import check_agent, refuse_task
from agentenv.runner.journal import read_lines
from agentenv.runner.outcomes import TREATMENT, is_error
from agentenv.runner.policy import Policies, check_endpoints
from agentenv.runner.results import (
    RESULTS,
    EpisodeResult,
    JobConfig,
    append_result,
    check_config,
    load_results,
    rewrite_results,
    write_atomic,
    write_json,
)
from agentenv.runner.retries import EpisodeSettings, run_episode_with_retries
from agentenv.sandbox import SandboxError, gc, get_backend, recycling
from agentenv.sandbox.labels import job_scope, run_id
from agentenv.tasks import Task, task_digest
from agentenv.verify import Score

log = get_logger(__name__)
EpisodeRunner = Callable[
    [Task, int, EpisodeSettings], Awaitable[tuple[EpisodeResult, Trajectory | None]]
]
"""Runs one episode (with its retries) of a task's sample, as the settings say."""


class Progress(BaseModel):
    """Where a job is, for a progress bar: episodes done (this run and before), passed,
    running, errors, and dollars so far."""

    total: int
    done: int = 0
    passed: int = 0
    running: int = 0
    errors: int = 0
    cost_usd: float = 0.0
    collected: int = 0  # containers and images of this job's killed runs removed at start
    budget_spent: bool = False  # no new episode starts: the job's --max-cost is reached
    failed_requests: int = 0  # model requests that failed (retried or not) in this run
    endpoint_notes: list[str] = []  # what the probe before the first episode found amiss


def job_config(
    tasks: list[Task],
    settings: EpisodeSettings,
    *,
    samples: int = 1,
    refused: Sequence[RefusedTask] = (),
) -> JobConfig:
    """What the job is: what a folder's ``config.json`` must match for a run to resume it
    (the attempts and the sandbox backend are not: a job may resume with others). A
    refused task is in it by its folder's digest, so that once fixed it is a changed task
    (``--redo-changed`` runs it)."""
    return JobConfig(
        model=settings.model,
        samples=samples,
        tasks={
            **{r.id: f"refused-{r.digest}" for r in refused},
            **{t.id: task_digest(t) for t in tasks},
        },
        keep_final=settings.keep_final,
        reasoning_effort=settings.reasoning_effort,
        folders={t.id: str(t.folder) for t in tasks if t.folder is not None},
        tags={t.id: list(t.tags) for t in tasks if t.tags},
        agent=settings.agent,
    )


def job_id(out: Path) -> str:
    """The label (``agentenv.job``) of everything the job in folder ``out`` makes."""
    return hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]


def collect_leftovers(out: Path, backend: str | None = None) -> int:
    """Remove the containers, volumes and images that killed runs of the job in ``out``
    left behind (their runner process is gone); never those of a live run, or of another
    job. Returns how many went. Blocking. Without an engine here (a Ray driver, say) there
    is nothing of ours to collect: that is logged, not raised. The temporary files and
    folders of killed runners on this host go too (whatever their job: their runner is dead;
    see :mod:`agentenv.scratch`). Only ``backend``'s objects (the default backend's for
    ``None``) are looked at."""
    archives = scratch.collect_leftovers()
    if archives:
        log.info("eval.collected_archives", n=len(archives))
    try:
        removed = gc.collect(get_backend(backend), job=job_id(out))
    except SandboxError as e:
        log.warning("eval.collect_failed", job=str(out), error=str(e))
        return 0
    if removed:
        runs = sorted({r.run for r in removed})
        log.info("eval.collected", job=str(out), n=len(removed), runs=runs)
    return len(removed)


async def run_eval(
    tasks: list[Task],
    settings: EpisodeSettings | str,
    *,
    out: Path,
    samples: int = 1,
    concurrency: int = 4,
    on_progress: Callable[[Progress], None] | None = None,
    executor: EpisodeRunner | None = None,
    max_cost_usd: float | None = None,
    retry_errors: bool = False,
    redo_changed: bool = False,
    refused: Sequence[RefusedTask] = (),
) -> list[Row]:
    """Run every (task, sample) that ``out`` has no result for yet; return the summary of
    all of them. Each task of ``refused`` (folders that did not load) gets a line per
    sample with outcome ``refused`` and its reason, and runs nothing. Refuses
    (``ConfigMismatch``) a folder that holds a different job; first removes what killed
    runs of this job left running. ``settings`` say how each episode
    runs (a model name alone means the defaults for everything else).

    ``retry_errors``: run again every episode whose last line is an error, whatever it was
    (see :func:`settled`). ``redo_changed``: when the tasks that changed since the folder's
    config are all that differs, drop their lines and run them again (see ``check_config``).

    With ``max_cost_usd`` no episode starts once the job (earlier runs included) has spent
    that much; running ones finish, and the total row's ``stopped`` says ``"max_cost"``.
    The cap is not part of the job: run again with a higher one to go on.

    ``executor`` runs one episode (with its retries) with the settings and returns its
    result and trajectory; by default it is :func:`run_episode_with_retries` here, and
    :func:`agentenv.eval.ray_executor.runner` makes one that runs them as Ray tasks on the
    nodes of a cluster (each using its own sandbox engine). Results and trajectories are
    written by this process either way."""
    if isinstance(settings, str):
        settings = EpisodeSettings(model=settings)
    if samples < 1 or concurrency < 1:
        raise ValueError("samples and concurrency must be at least 1")
    config = job_config(tasks, settings, samples=samples, refused=refused)
    # an agent unknown, not installable here or given a scripted policy: before anything runs
    harness = await anyio.to_thread.run_sync(
        functools.partial(
            check_agent, settings.agent, backend=settings.backend, model=settings.model
        )
    )
    if harness is not None:
        for task in tasks:
            refuse_task(task, harness)
    # a missing key fails here, before anything runs
    policies = Policies(settings.model, reasoning_effort=settings.reasoning_effort)
    check_config(out, config, redo_changed=redo_changed)
    lines = read_lines(out / RESULTS, EpisodeResult, repair=True)
    done, rerun = _resume_state(lines, retry_errors=retry_errors)
    todo = [(t, s) for t in tasks for s in range(samples) if (t.id, s) not in done]
    progress = Progress(
        total=(len(tasks) + len(refused)) * samples,
        done=len(done),
        passed=sum(r.passed for r in done.values()),
        errors=sum(is_error(r.outcome) for r in done.values()),
        # every dollar of earlier runs, the ones of episodes to run again included
        cost_usd=sum(r.cost_usd for r in [*done.values(), *rerun.values()]),
    )
    budget = Budget(max_cost_usd, spent_usd=progress.cost_usd)
    try:
        progress.endpoint_notes = await check_endpoints(policies)
    except JobStopped:
        await policies.aclose()
        raise
    # the process's run id (its sandboxes' label) and this call: one process may run a job
    # several times, and the job's wall time is counted per call
    this_run = f"{run_id()}.{uuid.uuid4().hex[:6]}"
    progress.collected = await anyio.to_thread.run_sync(collect_leftovers, out, settings.backend)
    # asked once, and only when a task to run asks for the internet
    wants = any(needs_internet(t) for t, _ in todo)
    offline = await anyio.to_thread.run_sync(unreachable) if wants else []
    log.info("eval.start", tasks=len(tasks), samples=samples, done=len(done), todo=len(todo))

    async def local(
        task: Task, sample: int, settings: EpisodeSettings
    ) -> tuple[EpisodeResult, Trajectory | None]:
        return await run_episode_with_retries(task, sample, settings, policies, out=out)

    run = _JobRun(
        out=out,
        settings=settings,
        runner=executor or local,
        policies=policies,
        budget=budget,
        progress=progress,
        done=done,
        rerun=rerun,
        this_run=this_run,
        on_progress=on_progress,
        limiter=anyio.CapacityLimiter(concurrency),
        offline=offline,
    )
    for task_refused in refused:
        for sample in range(samples):
            if (task_refused.id, sample) not in done:
                run.record_refused(task_refused, sample)
    run.report()
    try:
        with job_scope(job_id(out)):
            # a finished episode's sandboxes are made as new for the next (a container's
            # create and remove cost far more than a recycle)
            async with recycling(), anyio.create_task_group() as outer:
                outer.start_soon(run.watch_requests)
                async with anyio.create_task_group() as tg:
                    for task, sample in todo:
                        tg.start_soon(run.or_stop, task, sample, tg.cancel_scope)
                outer.cancel_scope.cancel()
    finally:
        await policies.aclose()
    if run.stopped_by:
        raise run.stopped_by[0]
    stopped = "max_cost" if budget.stopped else None
    # an episode a resume was to run again but did not (the budget spent) is its last line
    last = {**rerun, **done}
    return write_summary(
        out, list(last.values()), samples, config.tags, stopped=stopped, agent=settings.agent
    )


@dataclass
class _JobRun:
    """One call of :func:`run_eval` on its job folder: what its episodes share (the journal
    they append to, the budget they spend, the progress they report) and what each does."""

    out: Path
    settings: EpisodeSettings
    runner: EpisodeRunner
    policies: Policies
    budget: Budget
    progress: Progress
    done: dict[tuple[str, int], EpisodeResult]  # the results a resume keeps, and this run's
    rerun: dict[tuple[str, int], EpisodeResult]  # the last line of each episode run again
    this_run: str
    on_progress: Callable[[Progress], None] | None
    limiter: anyio.CapacityLimiter
    # the probe hosts this one did not reach (asked only when a task wants the internet)
    offline: list[str] = field(default_factory=list)
    stopped_by: list[JobStopped] = field(default_factory=list)

    def report(self) -> None:
        """Show the progress (a copy: the caller may keep it)."""
        if self.on_progress is not None:
            self.on_progress(self.progress.model_copy())

    async def episode(self, task: Task, sample: int) -> None:
        """Run one episode when the limiter and the budget admit it, and record its result."""
        progress = self.progress
        if needs_internet(task) and self.offline:
            # no sandbox: its verdict would be the missing internet's, not the agent's
            result = EpisodeResult(
                task_id=task.id, sample=sample, outcome="no_internet",
                error=no_internet_reason(task, self.offline), attempts=0,
            )  # fmt: skip
            self.record(task.id, sample, result, None, time.time())
            return
        async with self.limiter:
            if not await self.budget.admit():
                if not progress.budget_spent:
                    progress.budget_spent = True
                    log.info("eval.budget_spent", budget=self.budget.describe())
                    self.report()
                return
            progress.running += 1
            self.report()
            started_at = time.time()
            try:
                result, traj = await self.runner(task, sample, self.settings)
            finally:
                progress.running -= 1
            self.record(task.id, sample, result, traj, started_at)

    def record(
        self,
        task_id: str,
        sample: int,
        result: EpisodeResult,
        traj: Trajectory | None,
        started_at: float,
    ) -> None:
        """Write a finished episode's trajectory and result line; count it."""
        # stamped here, by the process that writes the journal: the job's wall time
        # is measured per run of this process, wherever the episode ran
        result = result.model_copy(
            update={"run": self.this_run, "started_at": started_at, "finished_at": time.time()}
        )
        earlier = self.rerun.get((task_id, sample))
        new_usd = result.cost_usd  # what this run spent (earlier runs are counted)
        result = with_earlier_spend(result, earlier)
        if traj is not None and result.trajectory is not None:
            # the trajectory first: a result line always has its file
            write_atomic(self.out / result.trajectory, traj.model_dump_json(indent=1).encode())
        append_result(self.out, result)
        self.done[(task_id, sample)] = result
        self.budget.spend(new_usd)
        progress = self.progress
        progress.done += 1
        progress.passed += result.passed
        progress.errors += is_error(result.outcome)
        progress.cost_usd += new_usd
        self.report()

    def record_refused(self, task: RefusedTask, sample: int) -> None:
        """Record a task refused at load as a line of its own: its reason, no episode."""
        # no run or times: nothing ran, and the job's wall time and rate are its episodes'
        result = EpisodeResult(
            task_id=task.id, sample=sample, outcome="refused", error=task.reason, attempts=0
        )
        append_result(self.out, result)
        self.done[(task.id, sample)] = result
        self.progress.done += 1

    async def or_stop(self, task: Task, sample: int, scope: anyio.CancelScope) -> None:
        """Run one episode; the first that stops the job cancels ``scope`` (the others)."""
        # no line for the cancelled ones: a resume runs them; and the job raises its
        # reason, not a group of errors
        try:
            await self.episode(task, sample)
        except JobStopped as e:
            self.stopped_by.append(e)
            scope.cancel()

    async def watch_requests(self) -> None:
        """Report the count of failed model requests as it changes, until cancelled."""
        # a failing endpoint shows on the console while episodes retry, not only when
        # their retries are spent minutes later
        while True:
            await anyio.sleep(0.5)
            failed = self.policies.failed_requests()
            if failed != self.progress.failed_requests:
                self.progress.failed_requests = failed
                self.report()


MAX_RERUNS = 3  # runs of one episode ending in an infrastructure error before it is left as it is


def settled(
    out: Path, *, repair: bool = False, retry_errors: bool = False
) -> dict[tuple[str, int], EpisodeResult]:
    """The results of the job in ``out`` that a resume keeps: all but the infrastructure
    errors the outcome table retries (a lost sandbox, an endpoint down), which it runs again,
    unless that episode has ended so :data:`MAX_RERUNS` times already (then the error is
    deterministic, and running it again would only pay for the model again). With
    ``retry_errors`` only the graded ones: every error is run again (a task or verifier
    error too, once its cause is fixed). The old lines stay in the journal; the new one
    counts. ``repair``: see ``load_results``."""
    lines = read_lines(out / RESULTS, EpisodeResult, repair=repair)
    return _resume_state(lines, retry_errors=retry_errors)[0]


def _resume_state(
    lines: list[EpisodeResult], *, retry_errors: bool = False
) -> tuple[dict[tuple[str, int], EpisodeResult], dict[tuple[str, int], EpisodeResult]]:
    """The journal's ``lines`` as (what a resume keeps, see :func:`settled`; the last line
    of each episode it runs again)."""
    errors = Counter((r.task_id, r.sample) for r in lines if TREATMENT[r.outcome].retry)
    last = {(r.task_id, r.sample): r for r in lines}

    def keep(key: tuple[str, int], r: EpisodeResult) -> bool:
        if retry_errors:
            return TREATMENT[r.outcome].graded
        return not TREATMENT[r.outcome].retry or errors[key] >= MAX_RERUNS

    kept = {key: r for key, r in last.items() if keep(key, r)}
    return kept, {key: r for key, r in last.items() if key not in kept}


def write_summary(
    out: Path,
    results: list[EpisodeResult],
    k: int,
    tags: dict[str, list[str]] | None = None,
    *,
    stopped: str | None = None,
    agent: str | None = None,
) -> list[Row]:
    """Compute the summary (with per-tag subtotals from ``tags``, task id → its tags; each
    row naming the ``agent`` that played, ``None`` for the built-in loop) and write
    ``summary.json``."""
    rows = summarize(results, k, tags, stopped=stopped, agent=agent)
    write_json(out / "summary.json", [r.model_dump() for r in rows])
    return rows


def load_config(out: Path) -> JobConfig:
    """The job's ``config.json``; a clear error when ``out`` is not a job folder."""
    path = out / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{out} is not a job folder (no config.json in it)")
    return JobConfig.model_validate_json(path.read_text())


async def regrade(out: Path, *, backend: str | None = None) -> list[Row]:
    """Verify every kept final workspace again (``--keep-final``), in a new checker sandbox
    (``backend``'s; the default one for ``None``) made from the task's prepared state as its
    folder is now, without running any agent; rewrite the results and the summary."""
    config = load_config(out)
    # a task that no longer loads keeps the result it has
    by_id = {t.id: t for t in load_runnable(list(config.folders.values())).tasks}
    results = load_results(out)
    updated = []
    for key in sorted(results):
        result = results[key]
        task = by_id.get(result.task_id)
        if result.final_state is None or task is None:
            updated.append(result)
            continue
        path = out / result.final_state
        try:
            if not path.is_file():
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
            final = Final(workspace=Archive(path))  # read in chunks where it lies
            score = await regrade_final(task, final, backend=backend)
        except (OSError, SandboxError) as e:
            # one lost state does not stop the others from being regraded
            score = Score(reward=0.0, passed=False, error=f"kept final state {path}: {e}")
        graded = score is not None and score.error is None
        updated.append(
            result.model_copy(
                update={
                    "outcome": "graded" if graded else "verifier_error",
                    "reward": score.reward if graded and score else None,
                    "passed": bool(graded and score and score.passed),
                    "error": None if graded else (score.error if score else "no verifier"),
                    "score": score,
                }
            )
        )
    rewrite_results(out, updated)
    return write_summary(out, updated, config.samples, config.tags, agent=config.agent)


__all__ = [
    "EpisodeRunner",
    "EpisodeSettings",
    "JobStopped",
    "Progress",
    "check_endpoints",
    "collect_leftovers",
    "job_config",
    "job_id",
    "load_config",
    "regrade",
    "run_eval",
    "settled",
    "write_summary",
]
