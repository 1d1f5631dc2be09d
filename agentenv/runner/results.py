"""The durable record of an eval job: ``results.jsonl``, one line per finished episode (the
truth a re-run resumes from), and ``config.json``, what the job was (see :mod:`journal`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from agentenv.agent.loop import Spend
from agentenv.runner.journal import (
    ConfigMismatch,
    JobSettings,
    append_line,
    check_config,
    read_lines,
    write_atomic,
    write_json,
)
from agentenv.runner.outcomes import Outcome
from agentenv.verify import Score

RESULTS = "results.jsonl"


class EpisodeResult(Spend):
    """One finished episode (graded, or an error after its retries)."""

    task_id: str
    sample: int
    outcome: Outcome
    reward: float | None = None  # None unless graded
    passed: bool = False
    stop_reason: str | None = None
    error: str | None = None
    attempts: int = 1
    turns: int = 0
    wall_s: float = 0.0
    trajectory: str | None = None  # relative to the job folder
    final_state: str | None = None  # the final workspace kept with --keep-final (a tar)
    score: Score | None = None
    node: str | None = None  # where it ran, with a distributed executor


class JobConfig(JobSettings):
    """What must match for a re-run to resume an eval job folder."""

    UNCOMPARED: ClassVar[tuple[str, ...]] = ("folders",)

    model: str
    samples: int
    tasks: dict[str, str]  # task id → digest of its folder
    keep_final: bool = False
    reasoning_effort: str | None = None
    folders: dict[str, str] = Field(default_factory=dict)  # task id → folder, for regrading


def load_results(folder: Path, *, repair: bool = False) -> dict[tuple[str, int], EpisodeResult]:
    """The finished episodes, by (task, sample); the last line for each wins. ``repair``
    cuts off a line left half-written by a kill (only a job about to append does that)."""
    lines = read_lines(folder / RESULTS, EpisodeResult, repair=repair)
    return {(r.task_id, r.sample): r for r in lines}


def append_result(folder: Path, result: EpisodeResult) -> None:
    """Append one result line, durably."""
    append_line(folder / RESULTS, result)


def rewrite_results(folder: Path, results: list[EpisodeResult]) -> None:
    """Replace ``results.jsonl`` as a whole, atomically (regrading)."""
    data = b"".join(r.model_dump_json().encode() + b"\n" for r in results)
    write_atomic(folder / RESULTS, data)


__all__ = [
    "ConfigMismatch",
    "EpisodeResult",
    "JobConfig",
    "append_result",
    "check_config",
    "load_results",
    "rewrite_results",
    "write_atomic",
    "write_json",
]
