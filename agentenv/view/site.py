"""Write the site: ``index.html`` (the job), ``episodes/<task>--<sample>.html`` (each
episode, read only when opened), ``charts/`` (SVG), ``assets/`` (our stylesheet and
script)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from pathlib import Path

from agentenv.log import get_logger
from agentenv.runner.summary import summarize
from agentenv.view import files, pages
from agentenv.view.charts import job_charts
from agentenv.view.files import Refused, real_folder, write_file
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
    episodes whose result or trajectory changed get their page again, and pages of episodes
    no longer in the job are removed. ``refresh_s`` makes the job page reload itself that
    often (a job still running). Raises :class:`~agentenv.view.job.NotAJob` when ``source``
    is neither, :class:`~agentenv.view.files.Refused` when the default site folder is a
    link (written through, it could overwrite anything). An episode whose trajectory is
    missing, malformed or refused still gets its page, saying so (a job may still be
    running, or was killed mid-write)."""
    if out is None:
        out = site_folder(source)
        if out.is_symlink():
            raise Refused(
                f"{out} is a symbolic link: not written through; pass --out to put the "
                "site somewhere else"
            )
    else:
        out = out.resolve()  # a folder asked for by name, wherever its links lead
    job = load_job(source, out)
    folder = real_folder(out / "episodes")
    assets = real_folder(out / "assets")
    for asset in _ASSETS.iterdir():
        write_file(assets / asset.name, asset.read_bytes())
    if job.repos:
        return _refactor_site(job, out, refresh_s)
    manifest = out / ".built.json"
    built: dict[str, str] = {}
    with contextlib.suppress(Refused, ValueError):
        seen = json.loads(files.read_regular(manifest, files.MAX_PATCH_BYTES, manifest.name))
        built = seen if isinstance(seen, dict) else {}
    for episode in job.episodes:
        page = folder / f"{episode.key}.html"
        fingerprint = _fingerprint(episode)
        if built.get(episode.key) == fingerprint and page.is_file() and not page.is_symlink():
            continue
        trajectory, problems = None, list(episode.problems)
        if episode.trajectory is not None:
            try:
                trajectory = load_trajectory(episode.trajectory, episode.name or "trajectory")
            except NotAJob as e:
                log.warning("view.trajectory_unreadable", error=str(e))
                problems.append(str(e))
        _write(page, episode_page(episode, trajectory, problems))
        built[episode.key] = fingerprint
    _remove_stale(folder, {f"{episode.key}.html" for episode in job.episodes})
    _write(manifest, json.dumps({ep.key: built[ep.key] for ep in job.episodes}))
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
            charts = real_folder(out / "charts")
            for name, (what, svg) in drawn.items():
                write_file(charts / name, svg)
                shown.append((f"charts/{name}", what))
    index = out / "index.html"
    _write(index, job_page(job, rows, shown, missing, refresh_s=refresh_s))
    return index


def _refactor_site(job: Job, out: Path, refresh_s: float | None) -> Path:
    """A refactor job: its page and one page per repo (a few, each small: all made again)."""
    for repo in job.repos:
        trajectory, patch, problems = None, None, list(repo.problems)
        if repo.trajectory is not None:
            try:
                trajectory = load_trajectory(
                    repo.trajectory, f"trajectories/{repo.result.slug}.json"
                )
            except NotAJob as e:
                problems.append(str(e))
        if repo.patch is not None:
            try:
                data = files.read_regular(repo.patch, files.MAX_PATCH_BYTES, str(repo.result.patch))
                patch = data.decode("utf-8", errors="replace")
            except Refused as e:
                problems.append(f"its patch: {e}")
        page = repo_page(repo, trajectory, patch, problems)
        _write(out / "episodes" / f"{repo.key}.html", page)
    _remove_stale(out / "episodes", {f"{repo.key}.html" for repo in job.repos})
    index = out / "index.html"
    _write(index, refactor_page(job, refresh_s=refresh_s))
    return index


def _remove_stale(folder: Path, pages: set[str]) -> None:
    """Pages of episodes the job no longer has (and temporary files a killed build left)."""
    for entry in folder.iterdir():
        stale = entry.name.endswith(".partial") or (
            entry.name.endswith(".html") and entry.name not in pages
        )
        if stale and not entry.is_dir():
            entry.unlink(missing_ok=True)


def _write(path: Path, text: str) -> None:
    write_file(path, text.encode("utf-8"))
