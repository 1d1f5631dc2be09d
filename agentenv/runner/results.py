"""The durable record of an eval job: ``results.jsonl``, one line per finished episode (the
truth a re-run resumes from), and ``config.json``, what the job was (see :mod:`journal`)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from agentenv.agent.trajectory import Spend
from agentenv.errors import ConfigMismatch
from agentenv.runner.journal import (
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
    """One finished episode (graded, or an error after its retries).

    ``wall_s`` is the whole episode, retries included, and ``phases`` splits it (seconds):
    ``prepare`` (the task's image and prepared state), ``create`` (the agent's sandbox),
    ``model`` (waiting for the model; the sandbox is frozen meanwhile), ``tools``,
    ``harness`` (an installed harness's own time outside its turns: its start-up),
    ``finish`` (reading the final workdir), ``verify``, ``teardown`` (removing sandboxes
    and images), ``retries`` (failed attempts before the last) and ``other``. Lines
    written before these existed read as empty phases and no times.

    Its spend (tokens, dollars) is what the episode cost the job: every attempt's turns,
    and for an episode a resume ran again (an infrastructure error), its earlier runs'
    too (the trajectory has only the last attempt's)."""

    task_id: str
    sample: int
    outcome: Outcome
    agent: str | None = None  # the harness that played it; None: the built-in loop
    reward: float | None = None  # None unless graded
    passed: bool = False
    stop_reason: str | None = None
    error: str | None = None
    attempts: int = 1
    turns: int = 0
    wall_s: float = 0.0
    trajectory: str | None = None  # relative to the job folder
    final_state: str | None = None  # the final workspace kept with --keep-final (a tar)
    artifacts: str | None = None  # a Harbor task's artifacts folder (with manifest.json)
    score: Score | None = None
    node: str | None = None  # where it ran, with a distributed executor
    phases: dict[str, float] = Field(default_factory=dict)
    run: str | None = None  # the runner's run id and call (a job resumed has several runs)
    started_at: float | None = None  # unix time
    finished_at: float | None = None
    # the verifier's signs of an attempt on the verdict (Score.suspicious): graded as the
    # check's on_suspicious says, and flagged for a person whatever it said
    suspicious: list[str] = Field(default_factory=list)


class JobConfig(JobSettings):
    """What must match for a re-run to resume an eval job folder."""

    UNCOMPARED: ClassVar[tuple[str, ...]] = ("folders", "tags")
    JOURNAL: ClassVar[str] = RESULTS
    ITEMS: ClassVar[str] = "tasks"
    ITEM_KEY: ClassVar[str] = "task_id"

    kind: Literal["eval"] = "eval"  # marks the folder as an eval job's (older ones lack it)
    model: str
    samples: int
    tasks: dict[str, str]  # task id → digest of its folder
    keep_final: bool = False
    reasoning_effort: str | None = None
    folders: dict[str, str] = Field(default_factory=dict)  # task id → folder, for regrading
    tags: dict[str, list[str]] = Field(default_factory=dict)  # task id → tags, for subtotals
    # the harness that plays every episode (``--agent``); None: the built-in loop. A resume
    # must use the same one (a folder from before it existed reads as the built-in loop's)
    agent: str | None = None


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
