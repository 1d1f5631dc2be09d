"""Write the site: ``index.html`` (the job), ``episodes/<task>--<sample>.html`` (each
episode, read only when opened), ``charts/`` (SVG), ``assets/`` (our stylesheet and
script)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
from pathlib import Path

from agentenv.agent.trajectory import Trajectory
from agentenv.eval.summary import summarize
from agentenv.log import get_logger
from agentenv.view import files, pages
from agentenv.view.artifacts import list_artifacts
from agentenv.view.charts import job_charts, left_out
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


MARK = ".agentenv-view"  # in every site folder this module made: others are not written into


def _site(source: Path, out: Path | None) -> Path:
    """Where the site goes, refusing a link at the default place and any folder that holds
    files but was not made by this module (a build removes stale pages: not someone's)."""
    if out is None:
        out = site_folder(source)
        if out.is_symlink():
            raise Refused(
                f"{out} is a symbolic link: not written through; pass --out to put the "
                "site somewhere else"
            )
        default = source.is_dir()  # <job>/view is the job's own: whatever is in it
    else:
        out, default = out.resolve(), False  # a folder asked for by name, wherever it is
    if not default and out.is_dir() and not (out / MARK).exists() and any(out.iterdir()):
        raise Refused(
            f"{out} holds files and is not a site made by agentenv view: not written into; "
            "choose a new or empty folder"
        )
    return out


def build_site(
    source: Path,
    out: Path | None = None,
    *,
    refresh_s: float | None = None,
    made: dict[str, str] | None = None,
) -> Path:
    """Build the site of ``source`` (a job folder or a trajectory file) into ``out``
    (default: :func:`site_folder`) and return its ``index.html``. Pages of episodes no
    longer in the job are removed. ``made`` (page -> what it was made from) is kept by a
    caller that builds the same site again, as the server does: then only the episodes
    whose result or trajectory changed get their page again (what is on the disk is never
    trusted for that: a job folder may come with pages of its own). ``refresh_s`` makes
    the job page reload itself that often (a job still running).

    Raises :class:`~agentenv.view.job.NotAJob` when ``source`` is neither,
    :class:`~agentenv.view.files.Refused` when the site folder is a link at the default
    place or a folder of other files. An episode whose trajectory is missing, malformed or
    refused still gets its page, saying so (a job may still be running, or was killed
    mid-write)."""
    out = _site(source, out)
    job = load_job(source, out)
    out.mkdir(parents=True, exist_ok=True)
    write_file(out / MARK, b"made by agentenv view\n")
    folder = real_folder(out / "episodes")
    assets = real_folder(out / "assets")
    for asset in _ASSETS.iterdir():
        write_file(assets / asset.name, asset.read_bytes())
    if job.repos:
        return _refactor_site(job, out, refresh_s)
    made = {} if made is None else made
    shown_by: dict[Path, str] = {}  # a trajectory -> the page showing it (one page each)
    for episode in job.episodes:
        page = folder / f"{episode.key}.html"
        fingerprint = _fingerprint(episode)
        if made.get(episode.key) == fingerprint and page.is_file() and not page.is_symlink():
            continue
        problems = list(episode.problems)
        trajectory = _read_once(episode.trajectory, episode.name, episode.key, shown_by, problems)
        listed = list_artifacts(source, episode.result.artifacts) if source.is_dir() else []
        _write(page, episode_page(episode, trajectory, problems, listed))
        made[episode.key] = fingerprint
    _remove_stale(folder, {f"{episode.key}.html" for episode in job.episodes})
    for key in set(made) - {episode.key for episode in job.episodes}:
        del made[key]
    results = [ep.result for ep in job.episodes]
    tags = {ep.result.task_id: ep.tags for ep in job.episodes}
    rows = summarize(results, max(job.samples, 1), tags) if results else []
    shown: list[tuple[str, str]] = []  # (file, what it shows)
    missing = None
    notes: list[str] = []  # charts not drawn for this job, and why
    charts = real_folder(out / "charts")
    if rows:
        try:
            drawn = job_charts(rows)
        except ImportError:
            missing = "charts need matplotlib: pip install 'agentenv[view]'"
            log.warning("view.no_charts", reason=missing)
        except Exception as e:  # a chart is not worth the site: say why there is none
            missing = f"the charts could not be drawn: {type(e).__name__}: {e}"[:500]
            log.warning("view.charts_failed", error=missing)
        else:
            for name, (what, svg) in drawn.items():
                write_file(charts / name, svg)
                shown.append((f"charts/{name}", what))
            notes = left_out(rows)
    _remove_stale(charts, {name.removeprefix("charts/") for name, _ in shown}, ".svg")
    for partials in (out, assets):
        _remove_stale(partials, set(), ".partial")
    index = out / "index.html"
    _write(index, job_page(job, rows, shown, missing, notes, refresh_s=refresh_s))
    return index


def _refactor_site(job: Job, out: Path, refresh_s: float | None) -> Path:
    """A refactor job: its page and one page per repo (a few, each small: all made again)."""
    shown_by: dict[Path, str] = {}
    for repo in job.repos:
        patch, problems = None, list(repo.problems)
        name = f"trajectories/{repo.result.slug}.json"
        trajectory = _read_once(repo.trajectory, name, repo.key, shown_by, problems)
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


def _read_once(
    path: Path | None, name: str | None, key: str, shown_by: dict[Path, str], problems: list[str]
) -> Trajectory | None:
    """The trajectory at ``path`` for the page ``key``, unless another page shows it
    already (a journal written by someone else may name one huge file a thousand times);
    what went wrong is added to ``problems``."""
    if path is None:
        return None
    if path in shown_by:
        problems.append(f"{name}: another episode names the same file; see {shown_by[path]}")
        return None
    shown_by[path] = f"{key}.html"
    try:
        return load_trajectory(path, name or "trajectory")
    except NotAJob as e:
        log.warning("view.trajectory_unreadable", error=str(e))
        problems.append(str(e))
        return None


def _remove_stale(folder: Path, keep: set[str], suffix: str = ".html") -> None:
    """Files named ``*suffix`` in ``folder`` but ``keep`` (pages of episodes the job no
    longer has, charts not drawn), and the temporary files a killed build left."""
    for entry in folder.iterdir():
        stale = entry.name.endswith(".partial") or (
            entry.name.endswith(suffix) and entry.name not in keep
        )
        if stale and not entry.is_dir():
            entry.unlink(missing_ok=True)


def _write(path: Path, text: str) -> None:
    # a lone surrogate (valid in JSON's escapes, not in UTF-8) becomes "?", not an error
    write_file(path, text.encode("utf-8", errors="replace"))
