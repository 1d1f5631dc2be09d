"""Refactor verdicts on real repos built here, in real sandboxes: a failing codemod is an
error, detection tests the checkout and not a copy the image ships, the common Python layouts
are detected, timeouts say so, and a red repo's summary says why."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from agentenv.refactor.job import apply_patches, run_refactor
from agentenv.refactor.repos import RepoEntry, RepoError, detect_test_command, git, load_repo_list

pytestmark = pytest.mark.anyio
ADD = "def add(a, b):\n    return a + b\n"
TEST_ADD = "from {mod} import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
# breaks add() wherever it is: every repo below goes red if its tests test the checkout
BREAK_ADD = "command:git grep -lz 'a + b' -- '*.py' | xargs -0 -r sed -i 's/a + b/a - b/'"


def make_repo(path: Path, files: dict[str, str], *, user: str | None = None) -> Path:
    """A git repo at ``path`` holding ``files``, in one commit on ``main`` (``user``: the
    repo's own git identity, ``Name <email>``)."""
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(textwrap.dedent(text))
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    if user is not None:
        name, _, email = user.partition(" <")
        git(path, "config", "user.name", name)
        git(path, "config", "user.email", email.rstrip(">"))
    git(path, "add", "-A")
    git(path, "-c", "user.name=Builder", "-c", "user.email=b@example.com", "commit", "-qm", "start")
    return path


async def test_a_failing_codemod_is_an_error_and_timeouts_say_so(tmp_path: Path) -> None:
    # one codemod, three behaviours picked by a marker file: edits then fails; hangs; works
    codemod = (
        "command:sed -i 's/a + b/b + a/' calc.py;"
        " if [ -f FAIL ]; then echo 'cannot parse\nsecond line' >&2; exit 3; fi;"
        " if [ -f HANG ]; then sleep 60; fi"
    )
    base = {"calc.py": ADD, "test_calc.py": TEST_ADD.format(mod="calc")}
    halfway = make_repo(tmp_path / "halfway", {**base, "FAIL": ""})
    hang = make_repo(tmp_path / "hang", {**base, "HANG": ""})
    ok = make_repo(tmp_path / "ok", base)
    slow = make_repo(tmp_path / "slow", base)
    entries = [
        RepoEntry(path=halfway, name="halfway"),
        RepoEntry(path=hang, name="hang"),
        RepoEntry(path=ok, name="ok"),
        RepoEntry(path=slow, name="slow", test="sleep 60"),
    ]
    out = tmp_path / "job"
    results = {
        r.repo: r
        for r in await run_refactor(
            entries, "Swap the operands.", codemod, out=out, test_timeout_s=3, command_timeout_s=3
        )
    }
    assert {n: r.outcome for n, r in results.items()} == {
        "halfway": "error",
        "hang": "error",
        "ok": "changed-green",
        "slow": "baseline-red",
    }
    failed = results["halfway"]
    assert failed.error is not None and failed.error.startswith("the codemod failed (exit 3)")
    assert "cannot parse" in failed.error and "second line" in failed.error
    assert failed.patch == "patches/halfway.patch" and failed.after is None  # kept, not tested
    assert "+    return b + a" in (out / "patches" / "halfway.patch").read_text()
    assert results["hang"].error is not None
    assert results["hang"].error.startswith("the codemod failed (timed out after 3 s)")
    before = results["slow"].before
    assert before is not None and before.verdict == "timed out after 3 s" and not before.green
    summary = (out / "summary.md").read_text()
    assert "timed out after 3 s" in summary and "exit 124" not in summary
    row = next(ln for ln in summary.splitlines() if ln.startswith("| halfway |"))
    assert "cannot parse<br>second line" in row  # a multi-line error stays in its row
    # --apply commits only what was verified: not the half-done change
    made = apply_patches(entries, out, "swap")
    assert [a.repo for a in made] == ["ok"]
    assert git(halfway, "branch", "--list", "agentenv/*") == ""


# a package the base image ships (more_itertools 8.10 in /usr/lib/python3/dist-packages):
# without care, `python3 -m pytest` tests that copy and a broken checkout passes
SHIPPED = "def first(iterable, default=None):\n    for item in iterable:\n        return item\n    return default\n"  # noqa: E501
TEST_FIRST = (
    "from more_itertools import first\n\n\ndef test_first():\n    assert first([7, 8]) == 7\n"
)
BREAK_FIRST = "command:sed -i 's/return item/return None/' src/more_itertools/__init__.py"


async def test_detection_tests_the_checkout_not_a_copy_the_image_ships(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "mit",
        {
            "pyproject.toml": '[project]\nname = "more-itertools"\nversion = "0"\n',
            "src/more_itertools/__init__.py": SHIPPED,
            "tests/test_first.py": TEST_FIRST,
        },
    )
    detected = detect_test_command(repo)
    assert detected is not None and detected.command.startswith('PYTHONPATH="$PWD/src" ')
    (result,) = await run_refactor(
        [RepoEntry(path=repo, name="mit")], "Break first().", BREAK_FIRST, out=tmp_path / "j"
    )
    assert result.before is not None and result.before.green  # the repo's own code passes
    assert result.outcome == "changed-red", result
    assert result.test_command == detected.command
    assert result.test_reason is not None and "src/ layout" in result.test_reason
    assert "FAILED tests/test_first.py::test_first" in result.why
    summary = (tmp_path / "j" / "summary.md").read_text()
    assert "why this command" in summary and "FAILED tests/test\\_first.py::test\\_first" in summary


async def test_detection_covers_the_common_python_layouts(tmp_path: Path) -> None:
    slow_fails = "\n\ndef test_slow():\n    assert False, 'not meant to run here'\n"
    repos = {
        # tests inside the package: no test_*.py at the top
        "pkgtests": {
            "calc/__init__.py": ADD,
            "calc/tests/__init__.py": "",
            "calc/tests/test_calc.py": TEST_ADD.format(mod="calc"),
        },
        # `make test` calling `python`, which the image does not have
        "makepy": {
            "Makefile": "PYTHON ?= python\n\ntest:\n\t$(PYTHON) -m pytest -q checks/test_calc.py\n",
            "calc.py": ADD,
            "checks/test_calc.py": TEST_ADD.format(mod="calc"),
        },
        # tox's pytest command deselects a slow test and asks for coverage (no pytest-cov)
        "toxrepo": {
            "tox.ini": "[tox]\nenvlist = py3\n\n[testenv]\ndeps = pytest\ncommands =\n"
            '    pytest {posargs} -k "not slow" --cov=calc\n',
            "calc.py": ADD,
            "test_calc.py": TEST_ADD.format(mod="calc") + slow_fails,
        },
        "noxrepo": {
            "noxfile.py": "import nox\n\n\n@nox.session\ndef tests(session):\n"
            '    session.install("pytest")\n'
            '    session.run("pytest", "-k", "not slow", *session.posargs)\n',
            "calc.py": ADD,
            "test_calc.py": TEST_ADD.format(mod="calc") + slow_fails,
        },
        # pytest settings name files that are not test_*.py
        "pyproj": {
            "pyproject.toml": "[tool.pytest.ini_options]\n"
            'testpaths = ["checks"]\npython_files = ["check_*.py"]\n',
            "calc.py": ADD,
            "checks/check_calc.py": TEST_ADD.format(mod="calc"),
        },
    }
    entries = [RepoEntry(path=make_repo(tmp_path / n, f), name=n) for n, f in repos.items()]
    results = {
        r.repo: r
        for r in await run_refactor(
            entries, "Break add().", BREAK_ADD, out=tmp_path / "j", concurrency=3
        )
    }
    for name, r in results.items():  # green before (found and runnable), red after (tested)
        assert r.before is not None and r.before.green, (name, r.before, r.error)
        assert r.outcome == "changed-red", (name, r)
        assert "FAILED" in r.why and "test_add" in r.why, (name, r.why)
    assert results["makepy"].test_command is not None
    assert results["makepy"].test_command.endswith("make test")
    assert "calls `python`" in str(results["makepy"].test_reason)
    assert results["toxrepo"].test_command == "python3 -m pytest -q -k 'not slow'"
    assert "left out: --cov=calc" in str(results["toxrepo"].test_reason)
    assert results["noxrepo"].test_command == "python3 -m pytest -q -k 'not slow'"
    assert "pyproject.toml" in str(results["pyproj"].test_reason)
    assert "calc/tests/test_calc.py" in str(results["pkgtests"].test_reason)
    summary = (tmp_path / "j" / "summary.md").read_text()
    assert summary.count("FAILED") >= len(repos)  # each red row says why


def test_repo_list_entries_are_checked_before_anything_runs(tmp_path: Path) -> None:
    make_repo(tmp_path / "a", {"x.py": ""})
    listing = tmp_path / "repos.txt"
    listing.write_text("a name=team/x\na name=team+x\n")
    with pytest.raises(RepoError, match=r"repos\.txt:2: .*same file name \('team-x'\).*:1"):
        load_repo_list(listing)


async def test_a_change_that_guts_the_tests_is_not_green(tmp_path: Path) -> None:
    # The agent is an adversary: its patch may break the code and then delete, skip or
    # neuter the tests that would say so. Tests it drops are caught by the counts; edits
    # to what decides the verdict are named on the row either way.
    two = (
        "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_sub():\n    assert sub(3, 1) == 2\n"
    )
    base = {"calc.py": ADD + "\n\ndef sub(a, b):\n    return a - b\n", "test_calc.py": two}
    deletes = make_repo(tmp_path / "deletes", {**base, "DELETE": ""})
    skips = make_repo(tmp_path / "skips", {**base, "SKIP": ""})
    renames = make_repo(tmp_path / "renames", {**base, "RENAME": ""})
    codemod = (
        "command:if [ -f DELETE ]; then sed -i 's/a + b/a - b/' calc.py;"
        " python3 -c \"import re,pathlib; p=pathlib.Path('test_calc.py');"
        " p.write_text(re.sub(r'def test_add.*?\\n\\n\\n', '', p.read_text(), flags=re.S))\"; fi;"
        " if [ -f SKIP ]; then sed -i 's/a + b/a - b/' calc.py;"
        " printf 'import pytest\\n@pytest.fixture(autouse=True)\\ndef _s(request):\\n"
        '    if request.node.name == "test_add": pytest.skip("later")\\n\' > conftest.py; fi;'
        " if [ -f RENAME ]; then sed -i 's/\\bsub\\b/subtract/g' calc.py test_calc.py; fi"
    )
    entries = [RepoEntry(path=p, name=p.name) for p in (deletes, skips, renames)]
    results = {
        r.repo: r for r in await run_refactor(entries, "Tidy up.", codemod, out=tmp_path / "job")
    }
    for name in ("deletes", "skips"):
        r = results[name]
        assert r.outcome == "changed-red", (name, r)
        assert r.before is not None and r.before.passed == 2
        assert r.after is not None and r.after.passed == 1
        assert r.error is not None and "2 tests passed before the change and 1 after" in r.error
    assert "test_calc.py" in " ".join(results["deletes"].notes)
    assert "conftest.py" in " ".join(results["skips"].notes)
    renamed = results["renames"]
    assert renamed.outcome == "changed-green", renamed
    assert any(
        n.startswith("the change edits files that decide the verdict: test_calc.py")
        for n in renamed.notes
    ), renamed.notes
    summary = (tmp_path / "job" / "summary.md").read_text()
    assert "2 tests passed before the change and 1 after" in summary
