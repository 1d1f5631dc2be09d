"""Per-task, per-tag and total figures of a job: pass@1, pass@k (the unbiased estimator),
mean reward, tokens, cache hits, dollars and dollars per solved episode, time by phase,
errors, tasks refused at load (neither graded nor errors); and for the whole job its wall
time and episodes per second."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from math import comb
from typing import Literal

from pydantic import BaseModel, Field

from agentenv.runner.outcomes import TREATMENT
from agentenv.runner.results import EpisodeResult


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k samples drawn from n (c of them correct) passes:
    1 - C(n-c, k) / C(n, k), the unbiased estimator of Chen et al. (2021)."""
    if n <= 0 or k <= 0 or k > n:
        raise ValueError(f"need 0 < k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def natural_key(text: str) -> tuple[str | tuple[int, str], ...]:
    """Sort key that orders the numbers inside names by value: task-2 before task-10. A
    number compares by its length, then its digits (no ``int()``: an id of 5,000 digits is
    a name, not an error), and only ASCII digits are numbers."""
    parts = re.split(r"([0-9]+)", text)
    return tuple((len(p.lstrip("0")), p.lstrip("0")) if i % 2 else p for i, p in enumerate(parts))


class StepFigure(BaseModel):
    """One step of a multi-step task over a job's episodes of it."""

    reward: float  # the mean over the episodes that reached the step
    reached: int  # graded episodes that ran it


class Row(BaseModel):
    """The figures of one task (``kind`` ``"task"``), of the tasks carrying a tag
    (``"tag"``, ``task_id`` ``"tag:<name>"``), or of all of them (``"total"``, ``task_id``
    ``"total"``).

    ``wall_s`` sums the episodes' wall times and ``phases`` splits it by phase (see
    :class:`EpisodeResult`). ``usd_per_solved`` is every dollar the row's episodes spent
    (failed and errored ones included) divided by the episodes that passed; ``None`` when
    none passed. The total also has the job's own wall time (``job_wall_s``: for each run
    of the job, from its first episode's start to its last one's end, summed over the
    runs that resumed it), ``episodes_per_s`` over that time, and ``stopped`` when the job
    stopped early (``"max_cost"``: its budget was spent).

    ``steps`` (a multi-step task's row only) is, for each step in the order they ran, its
    mean reward over the graded episodes that reached it and how many did (an episode
    stops at a step below its ``min_reward``: the later steps do not count, as in Harbor's
    ``mean``)."""

    task_id: str
    kind: Literal["task", "tag", "total"] = "task"
    episodes: int
    graded: int
    passed: int
    pass_at_1: float | None
    pass_at_k: float | None
    k: int
    mean_reward: float | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cache_hit_rate: float
    cost_usd: float
    usd_per_solved: float | None = None
    wall_s: float
    phases: dict[str, float] = Field(default_factory=dict)
    errors: int
    refused: int = 0  # tasks refused at load (one line per sample), apart from the errors
    job_wall_s: float | None = None
    episodes_per_s: float | None = None
    stopped: str | None = None
    steps: dict[str, StepFigure] = Field(default_factory=dict)
    agent: str | None = None  # the harness that played the episodes; None: the built-in loop


def step_figures(graded: Sequence[EpisodeResult]) -> dict[str, StepFigure]:
    """Each step's mean reward over those of ``graded`` (a task's graded episodes) that
    reached it, steps in the order they ran; empty for a task without steps."""
    rewards: dict[str, list[float]] = {}
    for r in graded:
        for step in r.score.steps if r.score is not None else []:
            rewards.setdefault(step.name, []).append(step.reward)
    return {
        name: StepFigure(reward=sum(got) / len(got), reached=len(got))
        for name, got in rewards.items()
    }


def _row(
    task_id: str, results: list[EpisodeResult], k: int, kind: Literal["task", "tag", "total"]
) -> Row:
    graded = [r for r in results if TREATMENT[r.outcome].graded]
    refused = sum(r.outcome == "refused" for r in results)
    n, c = len(graded), sum(r.passed for r in graded)
    prompt = sum(r.prompt_tokens for r in results)
    cached = sum(r.cached_tokens for r in results)
    cost = sum(r.cost_usd for r in results)
    phases: dict[str, float] = {}
    for r in results:
        for name, seconds in r.phases.items():
            phases[name] = phases.get(name, 0.0) + seconds
    return Row(
        task_id=task_id,
        kind=kind,
        episodes=len(results),
        graded=n,
        passed=c,
        pass_at_1=pass_at_k(n, c, 1) if n else None,
        pass_at_k=pass_at_k(n, c, k) if 0 < k <= n else None,
        k=k,
        mean_reward=sum(r.reward or 0.0 for r in graded) / n if n else None,
        prompt_tokens=prompt,
        cached_tokens=cached,
        completion_tokens=sum(r.completion_tokens for r in results),
        cache_hit_rate=cached / prompt if prompt else 0.0,
        cost_usd=cost,
        usd_per_solved=cost / c if c else None,
        wall_s=sum(r.wall_s for r in results),
        phases=phases,
        errors=len(results) - n - refused,
        refused=refused,
        steps=step_figures(graded) if kind == "task" else {},
    )


def _mean_over_tasks(row: Row, task_rows: list[Row]) -> Row:
    # each task weighs the same, whatever its number of samples
    for field in ("pass_at_1", "pass_at_k"):
        values = [getattr(r, field) for r in task_rows if getattr(r, field) is not None]
        setattr(row, field, sum(values) / len(values) if values else None)
    return row


def job_wall(results: list[EpisodeResult]) -> float | None:
    """The job's wall time: per run, its first episode's start to its last one's end,
    summed over runs (``None`` when no result has times, as in older job folders)."""
    spans: dict[str, tuple[float, float]] = {}
    for r in results:
        if r.run is None or r.started_at is None or r.finished_at is None:
            continue
        first, last = spans.get(r.run, (r.started_at, r.finished_at))
        spans[r.run] = (min(first, r.started_at), max(last, r.finished_at))
    return sum(last - first for first, last in spans.values()) if spans else None


def summarize(
    results: list[EpisodeResult],
    k: int,
    tags: Mapping[str, Sequence[str]] | None = None,
    *,
    stopped: str | None = None,
    agent: str | None = None,
) -> list[Row]:
    """One row per task (names with numbers in natural order: task-2 before task-10), one
    per tag of ``tags`` (task id → its tags) unless the tag covers every task (it would
    repeat the total), then the total. Tag and total pass@1 and pass@k are the means over
    their tasks that have graded samples (each task weighs the same)."""
    by_task: dict[str, list[EpisodeResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    rows = {t: _row(t, by_task[t], k, "task") for t in sorted(by_task, key=natural_key)}
    by_tag: dict[str, list[str]] = {}
    for task_id in rows:
        for tag in (tags or {}).get(task_id, ()):
            by_tag.setdefault(tag, []).append(task_id)
    tag_rows = [
        _mean_over_tasks(
            _row(f"tag:{tag}", [r for t in ids for r in by_task[t]], k, "tag"),
            [rows[t] for t in ids],
        )
        for tag, ids in sorted(by_tag.items(), key=lambda item: natural_key(item[0]))
        if len(ids) < len(rows)
    ]
    total = _mean_over_tasks(_row("total", results, k, "total"), list(rows.values()))
    total.job_wall_s = job_wall(results)
    timed = sum(r.started_at is not None for r in results)
    if total.job_wall_s:
        total.episodes_per_s = timed / total.job_wall_s
    total.stopped = stopped
    every = [*rows.values(), *tag_rows, total]
    for row in every:
        row.agent = agent
    return every
