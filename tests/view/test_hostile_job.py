"""`agentenv view` on a job folder written by someone else: a report or results line that
names files outside the job, FIFOs and devices where trajectories should be, symbolic links
planted in the site folder, names built to collide or to break file systems and charts. The
site shows what is in the job, says what it refused, and never reads, writes or serves
anything outside it."""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenv.refactor.job import REPORT, RefactorConfig, RepoResult
from agentenv.runner.journal import append_line, write_json
from agentenv.runner.results import EpisodeResult, JobConfig, append_result
from agentenv.view import build_site
from agentenv.view import files as view_files
from agentenv.view.files import Refused
from agentenv.view.job import NotAJob
from agentenv.view.serve import serve
from tests.view.jobs import trajectory

pytestmark = pytest.mark.no_docker

SECRET = "HOST-SECRET-0451"


def _eval_job(
    folder: Path, results: list[EpisodeResult], tags: dict[str, list[str]] | None = None
) -> Path:
    folder.mkdir(parents=True)
    config = JobConfig(
        model="m", samples=1, tasks={r.task_id: "d" for r in results}, tags=tags or {}
    )
    write_json(folder / "config.json", config.model_dump())
    for result in results:
        append_result(folder, result)
    return folder


def _refactor_job(folder: Path, results: list[RepoResult]) -> Path:
    folder.mkdir(parents=True)
    config = RefactorConfig(
        model="m", instruction_sha256="0" * 64, repos={r.repo: "x" for r in results},
        max_turns=3, instruction="rename it",
    )  # fmt: skip
    write_json(folder / "config.json", config.model_dump())
    for result in results:
        append_line(folder / REPORT, result)
    return folder


def _graded(task: str, **fields: object) -> EpisodeResult:
    return EpisodeResult(task_id=task, sample=0, outcome="graded", reward=1.0, passed=True,
                         **fields)  # type: ignore[arg-type]  # fmt: skip


def _site_text(index: Path) -> str:
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in index.parent.rglob("*")
        if p.is_file() and not p.is_symlink()
    )


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the job: a secret file, another job's trajectory."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(f"+{SECRET}\n")
    (folder / "other.json").write_text(trajectory(SECRET, passed=True).model_dump_json())
    return folder


def test_a_patch_outside_the_job_is_not_read(tmp_path: Path, outside: Path) -> None:
    job = _refactor_job(
        tmp_path / "job",
        [
            RepoResult(repo="abs", slug="abs", path="x", outcome="changed-green",
                       patch=str(outside / "secret.txt")),
            RepoResult(repo="up", slug="up", path="x", outcome="changed-green",
                       patch="../outside/secret.txt"),
            RepoResult(repo="nul", slug="nul", path="x", outcome="changed-green",
                       patch="patches/a\x00b.patch"),
        ],
    )  # fmt: skip
    (job / "patches").mkdir()
    os.symlink(outside / "secret.txt", job / "patches" / "link.patch")
    append_line(
        job / REPORT,
        RepoResult(repo="link", slug="link", path="x", outcome="changed-green",
                   patch="patches/link.patch"),
    )  # fmt: skip
    index = build_site(job)
    text = _site_text(index)
    assert SECRET not in text and str(job) not in text
    for repo in ("abs", "up", "link"):
        page = (index.parent / "episodes" / f"{repo}.html").read_text(encoding="utf-8")
        assert "outside the job folder" in page, repo
        if repo != "abs":  # only the path the report itself gave: where a link leads is not said
            assert str(outside) not in page, repo


def test_trajectories_outside_the_job_are_not_read(tmp_path: Path, outside: Path) -> None:
    job = _eval_job(
        tmp_path / "job",
        [
            _graded("up", trajectory="../outside/other.json"),
            _graded("abs", trajectory=str(outside / "other.json")),
            _graded("zero", trajectory="/dev/zero"),
            _graded("nul", trajectory="trajectories/a\x00.json"),
            _graded("link", trajectory="trajectories/link.json"),
            _graded("dirlink", trajectory="linked/other.json"),
        ],
    )
    (job / "trajectories").mkdir()
    os.symlink(outside / "other.json", job / "trajectories" / "link.json")
    os.symlink(outside, job / "linked")
    index = build_site(job)
    text = _site_text(index)
    assert SECRET not in text and str(job) not in text
    for task in ("up", "abs", "zero", "link", "dirlink"):
        page = (index.parent / "episodes" / f"{task}--0.html").read_text(encoding="utf-8")
        assert "outside the job folder" in page, task
    nul = (index.parent / "episodes" / "nul--0.html").read_text(encoding="utf-8")
    assert "could not be read" in nul

    refactor = _refactor_job(
        tmp_path / "refactor",
        [RepoResult(repo="r", slug="../../outside/other", path="x", outcome="changed-green")],
    )
    index = build_site(refactor)
    assert SECRET not in _site_text(index)


def test_fifos_devices_and_huge_files_are_named_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a folder of trajectories (an RL pipeline's): a FIFO would block the build for ever
    folder = tmp_path / "rollouts"
    folder.mkdir()
    (folder / "good.json").write_text(trajectory("good", passed=True).model_dump_json())
    os.mkfifo(folder / "pipe.json")
    (folder / "big.json").write_text(trajectory("big", passed=True).model_dump_json())
    monkeypatch.setattr(view_files, "MAX_TRAJECTORY_BYTES", 20_000)
    (folder / "big.json").write_bytes(b" " * 30_000 + b"{}")
    (folder / "dir.json").mkdir()  # a folder named like a trajectory is not one
    done: list[Path] = []
    worker = threading.Thread(target=lambda: done.append(build_site(folder)), daemon=True)
    worker.start()
    worker.join(60)
    assert done, "the build hung on a FIFO"
    index = done[0].read_text(encoding="utf-8")
    assert index.count("<tr class=") == 3  # good, and an error row for each unreadable file
    pages = _site_text(done[0])
    assert "not a regular file" in pages and "larger than" in pages


def test_odd_ids_make_pages_and_charts(tmp_path: Path) -> None:
    long_id = "é" * 200  # 400 bytes: too long for a file name as it stands
    results = [
        _graded(long_id),
        _graded("a$\\frac{$b"),  # mathtext that does not parse
        _graded("$x$"),  # mathtext that does
        _graded("x" * 5000),
    ]
    job = _eval_job(tmp_path / "job", results, tags={"$x$": ["$y$"]})
    index = build_site(job)
    pages = sorted(p.name for p in (index.parent / "episodes").iterdir())
    assert len(pages) == 4 and all(len(name.encode()) <= 255 for name in pages)
    text = index.read_text(encoding="utf-8")
    assert long_id in text and "a$\\frac{$b" in text
    # the names are drawn as written: "$x$" is not typeset as maths (an italic x)
    for chart in ("reward.svg", "tags.svg"):
        assert "Oblique" not in (index.parent / "charts" / chart).read_text(), chart


def test_ids_built_to_collide_get_pages_of_their_own(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"a/b").hexdigest()
    ids = ["a/b", "a_b", "a?b", "A_B", f"a_b-{digest[:8]}", f"a_b-{digest[:16]}", ""]
    job = _eval_job(tmp_path / "job", [_graded(i, error=f"ERR<{i}>") for i in ids])
    index = build_site(job)
    links = re.findall(r"<a href='(episodes/[^']*)'>", index.read_text(encoding="utf-8"))
    assert len(links) == len(ids) == len({link.lower() for link in links})  # case too
    for link, task in zip(links, sorted(ids), strict=True):
        assert f"ERR&lt;{task}&gt;" in (index.parent / link).read_text(encoding="utf-8")

    refactor = _refactor_job(
        tmp_path / "refactor",
        [
            RepoResult(repo="one", slug="x", path="x", outcome="error", error="FIRST"),
            RepoResult(repo="two", slug="x", path="x", outcome="error", error="SECOND"),
        ],
    )
    index = build_site(refactor)
    links = re.findall(r"<a href='(episodes/[^']*)'>", index.read_text(encoding="utf-8"))
    assert len(set(links)) == 2
    assert "FIRST" in (index.parent / links[0]).read_text(encoding="utf-8")
    assert "SECOND" in (index.parent / links[1]).read_text(encoding="utf-8")


def test_links_planted_in_the_site_folder_are_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("original")
    job = _eval_job(tmp_path / "job", [_graded("a")])
    site = job / "view"
    site.mkdir()
    os.symlink(victim / "keep.txt", site / "index.html.partial")
    os.symlink(victim / "keep.txt", site / "index.html")
    os.symlink(victim, site / "assets")
    os.symlink(victim, site / "episodes")
    os.symlink(victim, site / "charts")
    os.symlink(victim / "keep.txt", site / ".built.json")
    index = build_site(job)
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]
    assert (victim / "keep.txt").read_text() == "original"
    assert not index.is_symlink() and "a--0.html" in index.read_text(encoding="utf-8")
    assert (site / "episodes" / "a--0.html").is_file() and not (site / "episodes").is_symlink()

    # the site folder itself a link (not asked for): refused, with the way out
    other = _eval_job(tmp_path / "other", [_graded("a")])
    os.symlink(victim, other / "view")
    with pytest.raises(Refused, match=r"view is a symbolic link.*--out"):
        build_site(other)
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]


def test_the_folder_scan_skips_only_the_site(tmp_path: Path) -> None:
    folder = tmp_path / "rollouts"
    (folder / "view").mkdir(parents=True)  # a pipeline's own folder that happens to be "view"
    (folder / "view" / "r1.json").write_text(trajectory("t1", passed=True).model_dump_json())
    (folder / "r2.json").write_text(trajectory("t2", passed=False).model_dump_json())
    index = build_site(folder, folder / "site")
    again = build_site(folder, folder / "site")  # its own .built.json is not a trajectory
    text = again.read_text(encoding="utf-8")
    assert index == again and text.count("<tr class=") == 2 and "data-status='error'" not in text


def test_pages_planted_in_the_job_are_made_again(tmp_path: Path) -> None:
    job = _eval_job(tmp_path / "job", [_graded("a")])
    episodes = job / "view" / "episodes"
    episodes.mkdir(parents=True)
    evil = "<script>document.title='PWNED'</script>"
    (episodes / "a--0.html").write_text(evil)
    (job / "view" / ".built.json").write_text('{"a--0": "anything"}')  # no trust in it
    (job / "view" / "charts").mkdir()
    (job / "view" / "charts" / "evil.svg").write_text(f"<svg>{evil}</svg>")
    (job / "view" / ".index.html.x.partial").write_text(evil)
    (job / "view" / "assets").mkdir()
    (job / "view" / "assets" / ".view.js.y.partial").write_text(evil)
    index = build_site(job)
    assert "PWNED" not in (episodes / "a--0.html").read_text(encoding="utf-8")
    assert not (job / "view" / "charts" / "evil.svg").exists()  # charts not drawn: removed
    assert not list(index.parent.rglob("*.partial"))


def test_a_folder_of_other_files_is_not_written_into(tmp_path: Path) -> None:
    job = _eval_job(tmp_path / "job", [_graded("a")])
    victim = tmp_path / "victim"
    (victim / "episodes").mkdir(parents=True)
    (victim / "index.html").write_text("theirs")
    (victim / "episodes" / "old.html").write_text("theirs")
    os.symlink(victim, job / "site")  # planted: `--out job/site` leads there
    with pytest.raises(Refused, match=r"not a site made by agentenv view"):
        build_site(job, job / "site")
    assert (victim / "index.html").read_text() == "theirs"
    assert (victim / "episodes" / "old.html").read_text() == "theirs"
    fresh = tmp_path / "fresh"
    build_site(job, fresh)
    assert build_site(job, fresh) == fresh / "index.html"  # its own site: built again


def test_numbers_and_shapes_no_job_of_ours_writes(tmp_path: Path) -> None:
    graded = '"outcome":"graded","reward":1,"passed":true'
    lines = [
        f'{{"task_id":"inf-cost","sample":0,{graded},"cost_usd":1e999}}',
        f'{{"task_id":"nan-wall","sample":0,{graded},"wall_s":NaN}}',
        f'{{"task_id":"big-wall","sample":0,{graded},"wall_s":1.7e308}}',
        f'{{"task_id":"inf-phase","sample":0,{graded},"phases":{{"model":1e999}}}}',
        f'{{"task_id":"long-sample","sample":{"9" * 300},{graded}}}',
        f'{{"task_id":"\u00b2","sample":0,{graded}}}',
        f'{{"task_id":"{"1" * 5000}","sample":0,{graded}}}',
        *(f'{{"task_id":"neg-{i}","sample":0,{graded},"cost_usd":-1}}' for i in range(45)),
    ]
    job = tmp_path / "job"
    job.mkdir()
    write_json(job / "config.json", JobConfig(model="m", samples=1, tasks={}).model_dump())
    (job / "results.jsonl").write_text("\n".join(lines) + "\n")
    index = build_site(job)
    pages = [p.name for p in (index.parent / "episodes").iterdir()]
    assert len(pages) == len(lines) and all(len(name.encode()) <= 255 for name in pages)
    assert "charts could not be drawn" not in index.read_text(encoding="utf-8")


def test_tool_calls_that_break_pretty_printing(tmp_path: Path) -> None:
    traj = trajectory("calls", passed=True, turns=3)
    bombs = ["[" * 100_000, '{"a": "\\ud800"}', "[" * 900 + "]" * 900]
    for turn, arguments in zip(traj.turns, bombs, strict=True):
        turn.completion.tool_calls[0].arguments = arguments
    (tmp_path / "calls.json").write_text(traj.model_dump_json())
    index = build_site(tmp_path / "calls.json")
    page = next((index.parent / "episodes").iterdir())
    assert page.stat().st_size < 2_000_000  # 900 deep, indented, would be ~800 kB per call


def test_amplification_is_bounded(tmp_path: Path) -> None:
    # a task with ten thousand long tags: every row would repeat them
    job = tmp_path / "job"
    job.mkdir()
    tags = {"t": [f"tag-{i}-" + "x" * 90 for i in range(10_000)]}
    config = JobConfig(model="m", samples=2, tasks={"t": "d"}, tags=tags)
    write_json(job / "config.json", config.model_dump())
    for sample in range(2):
        append_result(job, EpisodeResult(task_id="t", sample=sample, outcome="graded"))
    assert build_site(job).stat().st_size < 200_000
    # fifty lines naming one trajectory: shown once, the others point to it
    shared = _eval_job(
        tmp_path / "shared",
        [_graded(f"s{i}", trajectory="trajectories/one.json") for i in range(50)],
    )
    (shared / "trajectories").mkdir()
    (shared / "trajectories" / "one.json").write_text(
        trajectory("one", passed=True, turns=20).model_dump_json()
    )
    index = build_site(shared)
    texts = [p.read_text(encoding="utf-8") for p in (index.parent / "episodes").iterdir()]
    assert sum("<section class='turn'>" in t for t in texts) == 1
    assert sum("another episode names the same file" in t for t in texts) == 49


def test_a_journal_too_large_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = _eval_job(tmp_path / "job", [_graded("a")])
    monkeypatch.setattr(view_files, "MAX_JOURNAL_BYTES", 5_000)
    with open(job / "results.jsonl", "ab") as journal:
        journal.truncate(10_000)
    with pytest.raises(NotAJob, match=r"results\.jsonl: 10,000 bytes: too large"):
        build_site(job)


def test_a_deep_or_linked_folder_of_trajectories(tmp_path: Path) -> None:
    folder = tmp_path / "rollouts"
    deep = folder
    for _ in range(300):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "r.json").write_text(trajectory("deep", passed=True).model_dump_json())
    (folder / "r.json").write_text(trajectory("top", passed=True).model_dump_json())
    link = tmp_path / "link"
    os.symlink(folder, link)
    for _ in range(2):  # the second build must not read the first one's files
        text = build_site(link, link / "site").read_text(encoding="utf-8")
        assert text.count("<tr class=") == 1 and "data-status='error'" not in text


def test_pages_of_episodes_no_longer_in_the_job_are_removed(tmp_path: Path) -> None:
    job = _eval_job(tmp_path / "job", [_graded("a"), _graded("b")])
    build_site(job)
    (job / "results.jsonl").write_text(_graded("a").model_dump_json() + "\n")
    index = build_site(job)
    assert sorted(p.name for p in (index.parent / "episodes").iterdir()) == ["a--0.html"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    job = _eval_job(tmp_path / "job", [_graded("a")])
    (job / "view").mkdir()
    os.symlink("/", job / "view" / "root")
    os.symlink(job / "config.json", job / "view" / "config.json")
    (job / "view" / "evil.html").write_text("<script>document.title='PWNED'</script>")
    urls: list[str] = []
    stop = threading.Event()
    worker = threading.Thread(
        target=serve, args=(job, None), kwargs={"port": 0, "ready": urls.append, "stop": stop}
    )
    worker.start()
    try:
        for _ in range(200):
            if urls:
                break
            stop.wait(0.05)
        assert urls, "the server did not start"
        yield int(urls[0].split(":")[2].split("/")[0]), job
    finally:
        stop.set()
        worker.join(30)


def _get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host} if host else {}
    connection.request("GET", path, headers=headers)
    answer = connection.getresponse()
    if answer.status == 200:
        assert "default-src 'none'" in (answer.getheader("Content-Security-Policy") or "")
        assert answer.getheader("X-Content-Type-Options") == "nosniff"
    return answer.status, answer.read()


def test_the_server_serves_the_site_and_nothing_else(served: tuple[int, Path]) -> None:
    port, _ = served
    status, body = _get(port, "/index.html")
    assert status == 200 and b"a--0.html" in body
    assert _get(port, "/episodes/a--0.html")[0] == 200
    assert _get(port, "/root/etc/passwd")[0] == 404  # a link planted in the site folder
    assert _get(port, "/config.json")[0] == 404  # a link to a file of the job
    assert _get(port, "/episodes/")[0] == 404  # no listings
    assert _get(port, "/../config.json")[0] == 404
    assert _get(port, "/evil.html")[0] == 404  # a file in the folder the build did not write
    assert _get(port, "/%00")[0] == 404 and _get(port, "/%ed%a0%80")[0] == 404
    # a page of another origin reaching loopback through DNS rebinding names its own host
    assert _get(port, "/index.html", host="attacker.example")[0] == 421
    assert _get(port, "/index.html", host=f"localhost:{port}")[0] == 200
