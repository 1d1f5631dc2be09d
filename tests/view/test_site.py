"""`agentenv view` builds a static site from an eval job folder or one trajectory file:
every episode has its page, the agent's text is always escaped, nothing on any page points
off the machine, and a broken input is named, not a crash."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import pytest

from agentenv.model.types import ToolCall
from agentenv.view import build_site
from agentenv.view.job import NotAJob
from tests.view.jobs import HOSTILE, REASONING, trajectory, write_job

pytestmark = pytest.mark.no_docker

TASKS = ["parse-csv", "odd name é", "odd_name_é", "t10", "t2"]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.tags: list[str] = []
        self.meta: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "action", "srcset", "poster", "data") and value:
                self.urls.append(value)
        if tag == "meta":
            self.meta.append(dict(attrs))


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    job = tmp_path_factory.mktemp("job") / "my-job"
    write_job(job, TASKS)
    return build_site(job)


def test_every_episode_has_a_page_linked_from_the_job(site: Path) -> None:
    assert site == site.parent / "index.html" and site.parent.name == "view"
    links = [u for u in _parse(site).urls if u.startswith("episodes/")]
    assert len(links) == len(TASKS) * 2 == len(set(links))  # odd names do not collide
    for link in links:
        page = site.parent / link
        assert page.is_file(), link
        assert "../index.html" in _parse(page).urls


def test_the_agents_markup_is_text_everywhere(site: Path) -> None:
    pages = [site, *site.parent.glob("episodes/*.html")]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script>alert" not in text and "<img src='http" not in text, page
        assert _parse(page).tags.count("script") == 1  # ours, from assets/
    episode = (site.parent / "episodes" / "t2--0.html").read_text(encoding="utf-8")
    assert "&lt;/pre&gt;&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in episode
    # the reasoning is on the page, folded until opened
    assert "<details class='reasoning'>" in episode
    assert REASONING.split(".")[0] in episode


def test_nothing_on_a_page_points_off_the_machine(site: Path) -> None:
    for page in [site, *site.parent.glob("episodes/*.html")]:
        parsed = _parse(page)
        for url in parsed.urls:
            assert "://" not in url and not url.startswith("//"), (page, url)
            assert (page.parent / url).resolve().is_relative_to(site.parent), (page, url)
        policies = [m.get("content") or "" for m in parsed.meta]
        assert any("default-src 'none'" in p and "connect-src 'none'" in p for p in policies)
    for asset in (site.parent / "assets").iterdir():
        text = asset.read_text()
        assert "http://" not in text and "https://" not in text, asset


def test_outcomes_and_a_broken_trajectory_show(site: Path) -> None:
    index = site.read_text(encoding="utf-8")
    assert index.count("data-status='error'") == 1
    assert index.count("data-status='passed'") + index.count("data-status='failed'") == 9
    cut = (site.parent / "episodes" / "parse-csv--0.html").read_text(encoding="utf-8")
    assert "could not be read" in cut and "parse-csv/0.json" in cut
    errored = (site.parent / "episodes" / "t2--1.html").read_text(encoding="utf-8")
    assert "the container died" in errored


def test_a_single_trajectory_file(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(trajectory("solo", passed=True).model_dump_json())
    index = build_site(path)
    assert index.parent == tmp_path / "run.json.view"
    pages = list(index.parent.glob("episodes/*.html"))
    assert len(pages) == 1 and "tests pass" in pages[0].read_text(encoding="utf-8")


def test_what_is_not_a_job_is_named(tmp_path: Path) -> None:
    with pytest.raises(NotAJob, match=r"no config\.json"):
        build_site(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"task_id": "x", "messages": "not a list"}')
    with pytest.raises(NotAJob, match=r"bad\.json: not a trajectory: messages"):
        build_site(bad)
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "view", str(bad)], capture_output=True, text=True
    )
    assert done.returncode == 2 and "bad.json" in done.stderr and "Traceback" not in done.stderr


def test_the_cli_prints_where_the_site_is(tmp_path: Path) -> None:
    write_job(tmp_path / "job", ["a", "b"])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentenv",
            "view",
            str(tmp_path / "job"),
            "-o",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str((tmp_path / "s" / "index.html").resolve())
    assert HOSTILE not in (tmp_path / "s" / "index.html").read_text(encoding="utf-8")


def test_the_charts_are_files_of_ours_that_fetch_nothing(site: Path) -> None:
    images = [u for u in _parse(site).urls if u.endswith(".svg")]
    assert sorted(images) == [
        "charts/cost.svg", "charts/phases.svg", "charts/reward.svg", "charts/tags.svg",
        "charts/time.svg",
    ]  # fmt: skip
    for image in images:
        tree = ElementTree.parse(site.parent / image)  # well-formed SVG
        assert tree.getroot().tag == "{http://www.w3.org/2000/svg}svg"
        for element in tree.iter():
            for name, value in element.attrib.items():
                if name.endswith("href"):
                    assert value.startswith("#"), (image, name, value)  # inside the file only
    # the task names are drawn (as paths: no font to fetch), so the reward chart has a bar
    # per task; with many tasks it shows their spread instead
    reward = (site.parent / "charts" / "reward.svg").read_text()
    assert reward.count("<path") > len(TASKS)


def test_without_matplotlib_the_site_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_job(tmp_path / "job", ["a", "b"])
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails
    index = build_site(tmp_path / "job")
    assert "charts need matplotlib" in index.read_text(encoding="utf-8")
    assert not list(index.parent.glob("charts/*.svg"))


def _cells(index: Path) -> list[list[str]]:
    """The episodes table's rows, each a list of its cells' text."""
    body = index.read_text(encoding="utf-8").split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [
            html.unescape(re.sub("<[^>]+>", "", cell))
            for cell in re.findall("<td[^>]*>(.*?)</td>", row)
        ]
        for row in re.findall("<tr[^>]*>(.*?)</tr>", body)
    ]


def test_the_table_says_the_status_once_and_how_each_episode_ended(site: Path) -> None:
    text = site.read_text(encoding="utf-8")
    head = re.findall("<th data-col=[^>]*>(.*?)</th>", text)
    assert head.count("status") == 1 and "outcome" not in head and "ended" in head
    ended = head.index("ended")
    rows = _cells(site)
    assert len(rows) == len(TASKS) * 2
    by_status = {(row[head.index("status")], row[ended]) for row in rows}
    # passed and failed say how the agent stopped; the error says what went wrong
    assert by_status == {
        ("passed", "submitted"),
        ("failed", "max_turns"),
        ("error", "sandbox_lost"),
    }
    assert "graded" not in {cell for row in rows for cell in row}
    options = re.search("<select id='outcome'>(.*?)</select>", text).group(1)  # type: ignore[union-attr]
    assert re.findall("<option>(.*?)</option>", options) == [
        "max_turns",
        "sandbox_lost",
        "submitted",
    ]
    errored = (site.parent / "episodes" / "t2--1.html").read_text(encoding="utf-8")
    assert "error · reward — · 2 turns" in errored and "sandbox_lost" in errored


def test_a_written_files_content_is_a_block_of_lines(tmp_path: Path) -> None:
    traj = trajectory("writes", passed=True, turns=1)
    content = f"def total(xs):\n    return sum(xs)\n{HOSTILE}\n"
    traj.turns[0].completion.tool_calls[0] = ToolCall(
        id="c0",
        name="write_file",
        arguments=json.dumps({"path": "src/total.py", "content": content, "mode": 420}),
    )
    (tmp_path / "run.json").write_text(traj.model_dump_json())
    index = build_site(tmp_path / "run.json")
    page = next((index.parent / "episodes").iterdir()).read_text(encoding="utf-8")
    call = page.split("<div class='call'>", 1)[1].split("<div class='result", 1)[0]
    # the path, then the content as written: its lines kept, its markup escaped
    assert call.index("src/total.py") < call.index("def total")
    assert f"<pre>{html.escape(content, quote=True)}</pre>" in call
    assert "\\n" not in call and "420" in call


def test_a_job_that_cost_nothing_has_no_cost_chart(tmp_path: Path) -> None:
    write_job(tmp_path / "oracle", ["a", "b"], cost_usd=0.0)
    index = build_site(tmp_path / "oracle")
    images = [u for u in _parse(index).urls if u.endswith(".svg")]
    assert "charts/reward.svg" in images and "charts/cost.svg" not in images
    assert not (index.parent / "charts" / "cost.svg").exists()
    assert "no cost to chart" in index.read_text(encoding="utf-8")
