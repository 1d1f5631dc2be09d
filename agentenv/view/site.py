"""Write the site: ``index.html`` (the job), ``episodes/<task>--<sample>.html`` (each
episode, read only when opened), ``charts/`` (SVG), ``assets/`` (our stylesheet and
script)."""

from __future__ import annotations

import shutil
from pathlib import Path

from agentenv.log import get_logger
from agentenv.runner.summary import summarize
from agentenv.view.charts import job_charts
from agentenv.view.job import NotAJob, load_job, load_trajectory
from agentenv.view.pages import episode_page, job_page

log = get_logger(__name__)
_ASSETS = Path(__file__).with_name("assets")


def build_site(source: Path, out: Path | None = None) -> Path:
    """Build the site of ``source`` (a job folder or a trajectory file) into ``out``
    (default: ``<job folder>/view``, or ``<file>.view`` beside a trajectory file) and
    return its ``index.html``. Raises :class:`~agentenv.view.job.NotAJob` when ``source``
    is neither. An episode whose trajectory is missing or malformed still gets its page,
    saying so (a job may still be running, or was killed mid-write)."""
    job = load_job(source)
    if out is None:
        out = source / "view" if source.is_dir() else source.with_name(source.name + ".view")
    pages = out / "episodes"
    pages.mkdir(parents=True, exist_ok=True)
    shutil.copytree(_ASSETS, out / "assets", dirs_exist_ok=True)
    for episode in job.episodes:
        trajectory, problem = None, None
        if episode.trajectory is not None:
            try:
                trajectory = load_trajectory(episode.trajectory)
            except NotAJob as e:
                log.warning("view.trajectory_unreadable", error=str(e))
                problem = str(e)
        _write(pages / f"{episode.key}.html", episode_page(episode, trajectory, problem))
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
    _write(index, job_page(job, rows, shown, missing))
    return index


def _write(path: Path, text: str) -> None:
    _write_bytes(path, text.encode("utf-8"))


def _write_bytes(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)  # a browser refreshing meanwhile never sees half a page
