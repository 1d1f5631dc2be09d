"""What the viewer reads: an eval job folder (``config.json``, ``results.jsonl``,
``trajectories/``), a refactor job folder (``config.json``, ``report.jsonl``, ``patches/``,
``trajectories/``), a folder of trajectory files (an RL pipeline's: groups, rewards,
advantages) or a single trajectory file, as plain rows."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

from pydantic import BaseModel, ValidationError

from agentenv.agent.trajectory import Trajectory
from agentenv.errors import AgentenvError
from agentenv.refactor.job import REPORT, SOLVED, RefactorConfig, RepoResult, load_report
from agentenv.runner.results import RESULTS, EpisodeResult, JobConfig, load_results
from agentenv.view import files
from agentenv.view.files import Refused, inside


class NotAJob(AgentenvError):
    """The path is neither a job folder nor a trajectory file."""


class Episode(BaseModel):
    """One row of the job page, and where its trajectory is."""

    result: EpisodeResult
    tags: list[str] = []
    trajectory: Path | None = None  # resolved, inside the job; None when there is none
    name: str | None = None  # the trajectory as the job names it (relative), for messages
    problems: list[str] = []  # why its trajectory was not read
    group: str | None = None  # an RL group's id (rollouts forked from one prepared state)
    advantage: float | None = None  # within its group

    @property
    def key(self) -> str:
        """A name for its page: unique within the job, safe as a file name."""
        return f"{page_name(self.result.task_id)}--{_sample(self.result.sample)}"

    @property
    def status(self) -> str:
        """passed, failed, error, or refused (a task that did not load: no episode ran);
        the table's filter."""
        if self.result.outcome == "refused":
            return "refused"
        if self.result.outcome != "graded":
            return "error"
        return "passed" if self.result.passed else "failed"

    @property
    def ended(self) -> str:
        """How it ended, beside its status: what went wrong for an error (its outcome), how
        the agent stopped for a graded episode (``submitted``, ``max_turns``, ...; "—" for a
        line that does not say)."""
        if self.result.outcome != "graded":
            return self.result.outcome
        return self.result.stop_reason or "—"


class RepoEpisode(BaseModel):
    """One repo of a refactor job, and where its trajectory and patch are."""

    result: RepoResult
    trajectory: Path | None = None  # resolved, inside the job
    patch: Path | None = None  # resolved, inside the job
    problems: list[str] = []  # why its trajectory or patch was not read

    @property
    def key(self) -> str:
        """A name for its page, from the repo's name (unique in a report, as slugs need not
        be in a report written by someone else)."""
        return page_name(self.result.repo)

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


_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_HASHED = re.compile(r"-[0-9a-f]{16}$")


def page_name(name: str) -> str:
    """A file name for ``name``'s page, one per id: the id itself when it is short,
    lower-case, plain ASCII (and does not end like a hash); otherwise a readable form plus
    the id's hash. So every name is lower-case (one per id on a file system that ignores
    case too) and at most 117 bytes."""
    safe = "".join(c if c in _KEEP else "_" for c in name.lower()).lstrip(".")[:100] or "task"
    if safe != name or _HASHED.search(name):
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        safe += "-" + digest[:16]
    return safe


def _sample(sample: int) -> str:
    if 0 <= sample < 10**9:
        return str(sample)
    if -(10**9) < sample < 0:
        return f"n{-sample}"
    return "x" + hashlib.sha256(str(sample).encode()).hexdigest()[:16]  # a 300-digit number


MAX_TAGS, TAG_CHARS = 12, 60  # a task's tags as shown: each row repeats them


def _tags(tags: list[str]) -> list[str]:
    return [t if len(t) <= TAG_CHARS else t[: TAG_CHARS - 1] + "…" for t in tags[:MAX_TAGS]]


def _regular(path: Path) -> bool:
    """A regular file itself (not a link, FIFO or device): the job's own files are."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _config(path: Path) -> bytes:
    try:
        return files.read_regular(path, files.MAX_TRAJECTORY_BYTES, path.name)
    except Refused as e:
        raise NotAJob(f"{path.parent}: {e}") from e


def load_job(path: Path, site: Path | None = None) -> Job:
    """The job at ``path`` (a job folder or a trajectory ``.json``); raises
    :class:`NotAJob` naming what is missing or malformed. ``site`` is the folder the site
    goes to: a folder of trajectories does not read it. Files the job names outside its
    folder are not read (their rows say so)."""
    if path.is_file():
        return _single(path)
    config_path = path / "config.json"
    if not config_path.exists():
        real = path.resolve()
        skip = (site or path / "view").resolve()
        found = [p for p in files.walk(real, ".json") if not p.is_relative_to(skip)]
        if found:
            return _trajectories(real, found, title=path.name)
        raise NotAJob(f"{path} is not a job folder (no config.json) and holds no trajectory files")
    for own in (config_path, path / REPORT, path / RESULTS):
        if not own.exists():
            continue
        if not _regular(own):
            raise NotAJob(f"{own}: not a regular file: not read")
        if own.stat().st_size > files.MAX_JOURNAL_BYTES:
            raise NotAJob(f"{own}: {own.stat().st_size:,} bytes: too large to show")
    if (path / REPORT).exists():
        return _refactor(path, config_path)
    try:
        config = JobConfig.model_validate_json(_config(config_path))
    except ValidationError as e:
        raise NotAJob(f"{config_path}: not a job's config: {e.errors()[0]['msg']}") from e
    episodes = []
    for (_, _), result in sorted(load_results(path).items()):
        episode = Episode(result=result, tags=_tags(config.tags.get(result.task_id, [])))
        if result.trajectory:
            episode.name = result.trajectory
            try:
                episode.trajectory = inside(path, result.trajectory)
            except Refused as e:
                episode.problems.append(str(e))
        episodes.append(episode)
    return Job(title=path.name, model=config.model, samples=config.samples, episodes=episodes)


def _refactor(path: Path, config_path: Path) -> Job:
    try:
        config = RefactorConfig.model_validate_json(_config(config_path))
    except ValidationError as e:
        raise NotAJob(f"{config_path}: not a refactor job's config: {e.errors()[0]['msg']}") from e
    repos = []
    for _, result in sorted(load_report(path).items()):
        repo = RepoEpisode(result=result)
        if result.slug:
            try:
                trajectory = inside(path, f"trajectories/{result.slug}.json")
            except Refused as e:
                repo.problems.append(f"its trajectory: {e}")
            else:
                repo.trajectory = trajectory if trajectory.exists() else None
        if result.patch:
            try:
                repo.patch = inside(path, result.patch)
            except Refused as e:
                repo.problems.append(f"its patch: {e}")
        repos.append(repo)
    return Job(title=path.name, model=config.model, repos=repos, instruction=config.instruction)


def _trajectories(path: Path, found: list[Path], *, title: str) -> Job:
    """A folder of trajectory files, as an RL pipeline writes what ``stream`` yields: one
    row each, numbered per task in file order; an unreadable one is a row that says so."""
    episodes = []
    samples: dict[str, int] = {}
    for file in found:
        name = str(file.relative_to(path))
        try:
            trajectory = load_trajectory(inside(path, name), name)
        except (NotAJob, Refused) as e:
            task = file.stem
            result = EpisodeResult(task_id=task, sample=samples.get(task, 0), outcome="crash",
                                   error=str(e))  # fmt: skip
            samples[task] = result.sample + 1
            episodes.append(Episode(result=result, name=name, problems=[str(e)]))
            continue
        sample = samples.get(trajectory.task_id, 0)
        samples[trajectory.task_id] = sample + 1
        episodes.append(_episode(trajectory, inside(path, name), name, sample))
    return Job(title=title, samples=max(samples.values(), default=1), episodes=episodes)


def _single(path: Path) -> Job:
    trajectory = path.resolve()  # the file asked for, wherever its link points
    episode = _episode(load_trajectory(trajectory, path.name), trajectory, path.name, 0)
    return Job(title=path.name, episodes=[episode])


def _episode(trajectory: Trajectory, path: Path, name: str, sample: int) -> Episode:
    """A row made from a trajectory alone (no job around it)."""
    graded = trajectory.error is None and trajectory.score is not None
    result = EpisodeResult(
        task_id=trajectory.task_id,
        sample=sample,
        agent=trajectory.harness.name if trajectory.harness is not None else None,
        outcome="graded" if graded else "crash",
        reward=trajectory.reward,
        passed=bool(trajectory.score and trajectory.score.passed),
        stop_reason=trajectory.stop_reason,
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
        trajectory=path,
        name=name,
        group=trajectory.group_id,
        advantage=trajectory.advantage,
    )


def load_trajectory(path: Path, name: str) -> Trajectory:
    """A trajectory file (a regular file, within :data:`files.MAX_TRAJECTORY_BYTES`);
    :class:`NotAJob` naming it as ``name`` and the field when malformed or unreadable."""
    try:
        data = files.read_regular(path, files.MAX_TRAJECTORY_BYTES, name)
        return Trajectory.model_validate_json(data)
    except Refused as e:
        raise NotAJob(str(e)) from e
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise NotAJob(f"{name}: not a trajectory: {where}: {first['msg']}") from e
