"""Per-task and total figures of a job: pass@1, pass@k (the unbiased estimator), mean reward,
tokens, cache hits, dollars, wall time, errors."""

from __future__ import annotations

from math import comb

from pydantic import BaseModel

from agentenv.runner.outcomes import POLICY
from agentenv.runner.results import EpisodeResult


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k samples drawn from n (c of them correct) passes:
    1 - C(n-c, k) / C(n, k), the unbiased estimator of Chen et al. (2021)."""
    if n <= 0 or k <= 0 or k > n:
        raise ValueError(f"need 0 < k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


class Row(BaseModel):
    """The figures of one task, or of all of them (``task_id`` ``"total"``)."""

    task_id: str
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
    wall_s: float
    errors: int


def _row(task_id: str, results: list[EpisodeResult], k: int) -> Row:
    graded = [r for r in results if POLICY[r.outcome].graded]
    n, c = len(graded), sum(r.passed for r in graded)
    prompt = sum(r.prompt_tokens for r in results)
    cached = sum(r.cached_tokens for r in results)
    return Row(
        task_id=task_id,
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
        cost_usd=sum(r.cost_usd for r in results),
        wall_s=sum(r.wall_s for r in results),
        errors=len(results) - n,
    )


def summarize(results: list[EpisodeResult], k: int) -> list[Row]:
    """One row per task (sorted), then the total. The total's pass@1 and pass@k are the
    means over tasks that have graded samples (each task weighs the same)."""
    by_task: dict[str, list[EpisodeResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    rows = [_row(t, by_task[t], k) for t in sorted(by_task)]
    total = _row("total", results, k)
    for field in ("pass_at_1", "pass_at_k"):
        values = [getattr(r, field) for r in rows if getattr(r, field) is not None]
        setattr(total, field, sum(values) / len(values) if values else None)
    return [*rows, total]
