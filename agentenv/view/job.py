"""What the viewer reads: an eval job folder (``config.json``, ``results.jsonl``,
``trajectories/``), a refactor job folder (``config.json``, ``report.jsonl``, ``patches/``,
``trajectories/``), a folder of trajectory files (an RL pipeline's: groups, rewards,
advantages) or a single trajectory file, as plain rows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from agentenv.agent.trajectory import Trajectory
from agentenv.errors import AgentenvError
from agentenv.runner.refactor import REPORT, SOLVED, RefactorConfig, RepoResult, load_report
from agentenv.runner.results import EpisodeResult, JobConfig, load_results


class NotAJob(AgentenvError):
    """The path is neither a job folder nor a trajectory file."""


class Episode(BaseModel):
    """One row of the job page, and where its trajectory is."""

    result: EpisodeResult
    tags: list[str] = []
    trajectory: Path | None = None  # absolute; None when the episode wrote none
    group: str | None = None  # an RL group's id (rollouts forked from one prepared state)
    advantage: float | None = None  # within its group

    @property
    def key(self) -> str:
        """A name for its page: unique within the job, safe as a file name."""
        task = self.result.task_id
        safe = _safe(task)
        if safe != task:  # two ids may have the same safe form: the id's hash tells them apart
            safe += "-" + hashlib.sha256(task.encode()).hexdigest()[:8]
        return f"{safe}--{self.result.sample}"

    @property
    def status(self) -> str:
        """passed, failed or error (the table's filter)."""
        if self.result.outcome != "graded":
            return "error"
        return "passed" if self.result.passed else "failed"


class RepoEpisode(BaseModel):
    """One repo of a refactor job, and where its trajectory and patch are."""

    result: RepoResult
    trajectory: Path | None = None
    patch: Path | None = None

    @property
    def key(self) -> str:
        """A name for its page (the job's own slug for the repo)."""
        return _safe(self.result.slug or self.result.repo)

    @property
    def status(self) -> str:
        """passed (changed, tests green), failed or error."""
        if self.result.outcome == "error":
            return "error"
        return "passed" if self.result.outcome == SOLVED else "failed"


class Job(BaseModel):
    """A job as the viewer shows it: an eval's episodes, or a refactor's repos."""

    title: str
    model: str | None = None
    samples: int = 1
    episodes: list[Episode] = []
    repos: list[RepoEpisode] = []
    instruction: str | None = None  # a refactor's


def _safe(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return keep.lstrip(".")[:120] or "task"


def load_job(path: Path) -> Job:
    """The job at ``path`` (a job folder or a trajectory ``.json``); raises
    :class:`NotAJob` naming what is missing or malformed."""
    if path.is_file():
        return _single(path)
    config_path = path / "config.json"
    if not config_path.is_file():
        files = sorted(p for p in path.rglob("*.json") if "view" not in p.relative_to(path).parts)
        if files:
            return _trajectories(path, files)
        raise NotAJob(f"{path} is not a job folder (no config.json) and holds no trajectory files")
    if (path / REPORT).is_file():
        return _refactor(path, config_path)
    try:
        config = JobConfig.model_validate_json(config_path.read_bytes())
    except ValidationError as e:
        raise NotAJob(f"{config_path}: not a job's config: {e.errors()[0]['msg']}") from e
    episodes = []
    for (_, _), result in sorted(load_results(path).items()):
        trajectory = path / result.trajectory if result.trajectory else None
        tags = config.tags.get(result.task_id, [])
        episodes.append(Episode(result=result, tags=tags, trajectory=trajectory))
    return Job(title=path.name, model=config.model, samples=config.samples, episodes=episodes)


def _refactor(path: Path, config_path: Path) -> Job:
    try:
        config = RefactorConfig.model_validate_json(config_path.read_bytes())
    except ValidationError as e:
        raise NotAJob(f"{config_path}: not a refactor job's config: {e.errors()[0]['msg']}") from e
    repos = []
    for _, result in sorted(load_report(path).items()):
        trajectory = path / "trajectories" / f"{result.slug}.json" if result.slug else None
        exists = trajectory is not None and trajectory.is_file()
        patch = path / result.patch if result.patch else None
        repos.append(
            RepoEpisode(result=result, trajectory=trajectory if exists else None, patch=patch)
        )
    return Job(title=path.name, model=config.model, repos=repos, instruction=config.instruction)


def _trajectories(path: Path, files: list[Path]) -> Job:
    """A folder of trajectory files, as an RL pipeline writes what ``stream`` yields: one
    row each, numbered per task in file order; an unreadable one is a row that says so."""
    episodes = []
    samples: dict[str, int] = {}
    for file in files:
        try:
            trajectory = load_trajectory(file)
        except NotAJob as e:
            task = file.stem
            result = EpisodeResult(task_id=task, sample=samples.get(task, 0), outcome="crash",
                                   error=str(e))  # fmt: skip
            samples[task] = result.sample + 1
            episodes.append(Episode(result=result, trajectory=file.resolve()))
            continue
        sample = samples.get(trajectory.task_id, 0)
        samples[trajectory.task_id] = sample + 1
        episodes.append(_episode(trajectory, file, sample))
    return Job(title=path.name, samples=max(samples.values(), default=1), episodes=episodes)


def _single(path: Path) -> Job:
    return Job(title=path.name, episodes=[_episode(load_trajectory(path), path, 0)])


def _episode(trajectory: Trajectory, path: Path, sample: int) -> Episode:
    """A row made from a trajectory alone (no job around it)."""
    graded = trajectory.error is None and trajectory.score is not None
    result = EpisodeResult(
        task_id=trajectory.task_id,
        sample=sample,
        outcome="graded" if graded else "crash",
        reward=trajectory.reward,
        passed=bool(trajectory.score and trajectory.score.passed),
        error=trajectory.error,
        turns=len(trajectory.turns),
        wall_s=trajectory.wall_s,
        score=trajectory.score,
        **{
            name: getattr(trajectory, name)
            for name in EpisodeResult.model_fields
            if name in ("prompt_tokens", "cached_tokens", "completion_tokens", "cost_usd")
        },
    )
    return Episode(
        result=result,
        trajectory=path.resolve(),
        group=trajectory.group_id,
        advantage=trajectory.advantage,
    )


def load_trajectory(path: Path) -> Trajectory:
    """A trajectory file; :class:`NotAJob` naming the file and the field when malformed."""
    try:
        return Trajectory.model_validate_json(path.read_bytes())
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise NotAJob(f"{path}: not a trajectory: {where}: {first['msg']}") from e
    except (OSError, json.JSONDecodeError) as e:
        raise NotAJob(f"{path}: cannot read it: {e}") from e
