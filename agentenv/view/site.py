"""Write the site: ``index.html`` (the job), ``episodes/<task>--<sample>.html`` (each
episode, read only when opened), ``charts/`` (SVG), ``assets/`` (our stylesheet and
script)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import shutil
from pathlib import Path

from agentenv.log import get_logger
from agentenv.runner.summary import summarize
from agentenv.view import pages
from agentenv.view.charts import job_charts
from agentenv.view.job import Episode, Job, NotAJob, load_job, load_trajectory
from agentenv.view.pages import episode_page, job_page, refactor_page, repo_page

log = get_logger(__name__)
_ASSETS = Path(__file__).with_name("assets")


def site_folder(source: Path) -> Path:
    """Where the site of ``source`` goes by default: ``<job folder>/view``, or
    ``<file>.view`` beside a trajectory file."""
    return source / "view" if source.is_dir() else source.with_name(source.name + ".view")


@functools.cache
def _pages_version() -> str:
    """The page-making code itself: a page made by another version is made again."""
    return hashlib.sha256(Path(pages.__file__).read_bytes()).hexdigest()


def _fingerprint(episode: Episode) -> str:
    """What an episode's page is made from: its result line, its trajectory file, and the
    code that makes pages."""
    seen = _pages_version() + episode.result.model_dump_json()
    if episode.trajectory is not None:
        with contextlib.suppress(OSError):
            st = episode.trajectory.stat()
            seen += f"|{st.st_mtime_ns}|{st.st_size}"
    return hashlib.sha256(seen.encode()).hexdigest()


def build_site(source: Path, out: Path | None = None, *, refresh_s: float | None = None) -> Path:
    """Build the site of ``source`` (a job folder or a trajectory file) into ``out``
    (default: :func:`site_folder`) and return its ``index.html``; built again, only the
    episodes whose result or trajectory changed get their page again. ``refresh_s`` makes
    the job page reload itself that often (a job still running). Raises
    :class:`~agentenv.view.job.NotAJob` when ``source`` is neither. An episode whose
    trajectory is missing or malformed still gets its page, saying so (a job may still be
    running, or was killed mid-write)."""
    job = load_job(source)
    out = out or site_folder(source)
    folder = out / "episodes"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(_ASSETS, out / "assets", dirs_exist_ok=True)
    if job.repos:
        return _refactor_site(job, out, refresh_s)
    manifest = out / ".built.json"
    try:
        built: dict[str, str] = json.loads(manifest.read_text())
    except (OSError, ValueError):
        built = {}
    for episode in job.episodes:
        page = folder / f"{episode.key}.html"
        fingerprint = _fingerprint(episode)
        if built.get(episode.key) == fingerprint and page.exists():
            continue
        trajectory, problem = None, None
        if episode.trajectory is not None:
            try:
                trajectory = load_trajectory(episode.trajectory)
            except NotAJob as e:
                log.warning("view.trajectory_unreadable", error=str(e))
                problem = str(e)
        _write(page, episode_page(episode, trajectory, problem))
        built[episode.key] = fingerprint
    _write(manifest, json.dumps(built))
    results = [ep.result for ep in job.episodes]
    tags = {ep.result.task_id: ep.tags for ep in job.episodes}
    rows = summarize(results, max(job.samples, 1), tags) if results else []
    shown: list[tuple[str, str]] = []  # (file, what it shows)
    missing = None
    if rows:
        try:
            drawn = job_charts(rows)
        except ImportError:
            missing = "charts need matplotlib: pip install 'agentenv[view]'"
            log.warning("view.no_charts", reason=missing)
        else:
            (out / "charts").mkdir(exist_ok=True)
            for name, (what, svg) in drawn.items():
                _write_bytes(out / "charts" / name, svg)
                shown.append((f"charts/{name}", what))
    index = out / "index.html"
    _write(index, job_page(job, rows, shown, missing, refresh_s=refresh_s))
    return index


def _refactor_site(job: Job, out: Path, refresh_s: float | None) -> Path:
    """A refactor job: its page and one page per repo (a few, each small: all made again)."""
    for repo in job.repos:
        trajectory, problem, patch = None, None, None
        if repo.trajectory is not None:
            try:
                trajectory = load_trajectory(repo.trajectory)
            except NotAJob as e:
                problem = str(e)
        if repo.patch is not None:
            try:
                patch = repo.patch.read_text(encoding="utf-8", errors="replace")
            except OSError as e:
                problem = f"{repo.patch}: {e.strerror or e}"
        page = repo_page(repo, trajectory, patch, problem)
        _write(out / "episodes" / f"{repo.key}.html", page)
    index = out / "index.html"
    _write(index, refactor_page(job, refresh_s=refresh_s))
    return index


def _write(path: Path, text: str) -> None:
    _write_bytes(path, text.encode("utf-8"))


def _write_bytes(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)  # a browser refreshing meanwhile never sees half a page
