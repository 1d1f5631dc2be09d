"""The durable record of a job: ``results.jsonl``, one line per finished episode, appended and
fsynced, and the truth a re-run resumes from; ``config.json``, what the job was, so that a
re-run with different settings is refused instead of mixing results."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agentenv.runner.outcomes import Outcome
from agentenv.verify import Score

RESULTS = "results.jsonl"
CONFIG = "config.json"


class EpisodeResult(BaseModel):
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
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    trajectory: str | None = None  # relative to the job folder
    final_snapshot: str | None = None  # image kept with --keep-final, for regrading
    score: Score | None = None


class JobConfig(BaseModel):
    """What must match for a re-run to resume a job folder."""

    model: str
    samples: int
    tasks: dict[str, str]  # task id → digest of its folder
    keep_final: bool = False
    folders: dict[str, str] = {}  # task id → its folder (for regrading; not compared)

    def mismatch(self, other: JobConfig) -> list[str]:
        """The fields that differ from ``other``, described."""
        out = []
        for field in ("model", "samples", "keep_final"):
            if getattr(self, field) != getattr(other, field):
                out.append(f"{field}: {getattr(other, field)!r} then, {getattr(self, field)!r} now")
        if set(self.tasks) != set(other.tasks):
            out.append(f"tasks: {sorted(other.tasks)} then, {sorted(self.tasks)} now")
        else:
            changed = [t for t in self.tasks if self.tasks[t] != other.tasks[t]]
            if changed:
                out.append(f"task files changed since: {', '.join(sorted(changed))}")
        return out


class ConfigMismatch(Exception):
    """The job folder holds results of a different job."""


def check_config(folder: Path, config: JobConfig) -> None:
    """Write ``config.json`` for a new job; refuse (:class:`ConfigMismatch`) one that differs
    from what the folder was started with."""
    path = folder / CONFIG
    if path.exists():
        before = JobConfig.model_validate_json(path.read_text())
        problems = config.mismatch(before)
        if problems:
            raise ConfigMismatch(
                f"{folder} holds results of a different job ({'; '.join(problems)}); "
                "use another --out folder, or the same settings to resume"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, config.model_dump_json(indent=1).encode())


def load_results(folder: Path) -> dict[tuple[str, int], EpisodeResult]:
    """The finished episodes, by (task, sample). A last line cut short by a kill is dropped
    and cut off the file, so the next append starts on a fresh line."""
    path = folder / RESULTS
    if not path.exists():
        return {}
    data = path.read_bytes()
    out: dict[tuple[str, int], EpisodeResult] = {}
    good = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # the kill came mid-write
        try:
            result = EpisodeResult.model_validate_json(line)
        except ValidationError:
            break
        out[(result.task_id, result.sample)] = result
        good += len(line)
    if good < len(data):
        with open(path, "r+b") as f:
            f.truncate(good)
            os.fsync(f.fileno())
    return out


def append_result(folder: Path, result: EpisodeResult) -> None:
    """Append one line and make it durable before returning."""
    line = result.model_dump_json().encode() + b"\n"
    fd = os.open(folder / RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def rewrite_results(folder: Path, results: list[EpisodeResult]) -> None:
    """Replace ``results.jsonl`` as a whole, atomically (regrading)."""
    data = b"".join(r.model_dump_json().encode() + b"\n" for r in results)
    write_atomic(folder / RESULTS, data)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` so that it holds either the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, value: Any) -> None:
    """Write a JSON document atomically."""
    write_atomic(path, json.dumps(value, indent=1).encode())
