"""Refactor jobs over real git repos (built by examples/refactor/build_repos.py): every
outcome, the patches, --apply leaving the working tree alone, a scripted model through the
loop, bad input, and a SIGKILL mid-run."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentenv.agent.trajectory import Trajectory
from agentenv.refactor.job import RepoResult, apply_patches, load_report, run_refactor
from agentenv.refactor.repos import RepoError, git, load_repo_list, patch_applies
from agentenv.runner.journal import read_lines
from agentenv.sandbox import get_backend
from agentenv.sandbox.labels import run_id
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.view import build_site
from tests.helpers import frozen

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
RENAME = "Rename the helper http_util.fetch_json to get_json everywhere."
CODEMOD = 'command:git grep -lz fetch_json | xargs -0 -r sed -i "s/\\bfetch_json\\b/get_json/g"'


def build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_repos", ROOT / "examples" / "refactor" / "build_repos.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def repos(tmp_path: Path) -> Path:
    build_module().build(tmp_path / "repos")
    return tmp_path / "repos"


async def test_codemod_job_gives_every_outcome_and_apply_makes_branches(
    repos: Path, tmp_path: Path
) -> None:
    entries = load_repo_list(repos)
    results = {r.repo: r for r in await run_refactor(entries, RENAME, CODEMOD, out=tmp_path / "j")}
    assert {name: r.outcome for name, r in results.items()} == {
        "billing": "changed-green",
        "reports": "changed-red",
        "legacy": "baseline-red",
        "docs-site": "no-change",
    }
    billing = (tmp_path / "j" / "patches" / "billing.patch").read_text()
    assert "-def fetch_json(path):" in billing and "+def get_json(path):" in billing
    assert "+from http_util import get_json" in billing and "__pycache__" not in billing
    assert results["billing"].files_changed == 2 and results["billing"].after is not None
    assert results["billing"].after.passed == 1
    assert results["reports"].after is not None and results["reports"].after.failed == 1
    assert results["legacy"].patch is None and results["legacy"].turns == 0  # agent not run
    summary = (tmp_path / "j" / "summary.md").read_text()
    assert "| billing | changed-green |" in summary and "1 baseline-red" in summary

    head_before = git(repos / "billing", "rev-parse", "HEAD")
    made = apply_patches(entries, tmp_path / "j", "rename-helper")
    assert [(a.repo, a.made and a.made.branch, a.made and a.made.status) for a in made] == [
        ("billing", "agentenv/rename-helper", "created")
    ]
    billing_repo = repos / "billing"
    assert git(billing_repo, "rev-parse", "HEAD") == head_before  # current branch untouched
    assert git(billing_repo, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git(billing_repo, "status", "--porcelain") == ""  # working tree untouched
    assert "fetch_json" in (billing_repo / "billing.py").read_text()
    on_branch = git(billing_repo, "show", "agentenv/rename-helper:billing.py")
    assert "get_json" in on_branch and "fetch_json" not in on_branch
    assert git(billing_repo, "rev-parse", "agentenv/rename-helper~1") == head_before
    assert git(repos / "reports", "branch", "--list", "agentenv/*") == ""


async def test_a_scripted_model_refactors_through_the_loop(repos: Path, tmp_path: Path) -> None:
    def call(name: str, **args: Any) -> ScriptedToolCall:
        return ScriptedToolCall(name=name, arguments=json.dumps(args))

    script = [
        ScriptedTurn(
            reasoning="Find the uses first.",
            tool_calls=[call("bash", command="git grep -n fetch_json")],
        ),
        ScriptedTurn(
            reasoning="Two files; rename in both.",
            tool_calls=[
                call(
                    "edit_file",
                    path="http_util.py",
                    old_string="def fetch_json",
                    new_string="def get_json",
                ),
                call(
                    "edit_file",
                    path="billing.py",
                    old_string="import fetch_json",
                    new_string="import get_json",
                ),
                call(
                    "edit_file",
                    path="billing.py",
                    old_string="in fetch_json(",
                    new_string="in get_json(",
                ),
            ],
        ),
        ScriptedTurn(reasoning="Check.", tool_calls=[call("bash", command="python3 -m pytest -q")]),
        ScriptedTurn(reasoning="Green.", tool_calls=[call("submit", summary="renamed")]),
    ]
    entries = [e for e in load_repo_list(repos) if e.name == "billing"]
    with K3Server(script) as server:
        priced = f"{server.base_url}#input=1&cached_input=0.1&output=2"  # else self-hosted: $0
        (result,) = await run_refactor(entries, RENAME, priced, out=tmp_path / "j")
    assert result.outcome == "changed-green" and result.turns == 4
    assert result.prompt_tokens > 0 and result.cost_usd > 0
    traj = Trajectory.model_validate_json((tmp_path / "j/trajectories/billing.json").read_text())
    assert (result.prompt_tokens, result.cost_usd) == (traj.prompt_tokens, traj.cost_usd)
    figures = json.loads((tmp_path / "j" / "summary.json").read_text())
    assert figures["solved"] == 1 and figures["usd_per_solved"] == figures["cost_usd"] > 0
    assert f"(${result.cost_usd:.4f} per solved)" in (tmp_path / "j" / "summary.md").read_text()
    # the job's site: the repo in the table, its page with the coloured patch, the tests
    # before and after, and the agent's reasoning
    index = build_site(tmp_path / "j")
    assert "href='episodes/billing.html'" in index.read_text()
    page = (index.parent / "episodes" / "billing.html").read_text()
    assert "<span class='add'>+def get_json" in page
    assert "<span class='del'>-def fetch_json" in page
    assert "before: green" in page and "after: green" in page
    assert "Find the uses first." in page and RENAME.split()[0] in index.read_text()


async def test_a_sandbox_lost_mid_repo_is_an_error_that_still_counts_its_paid_turns(
    repos: Path, tmp_path: Path
) -> None:
    turns = {"asked": 0}

    def losing_script(body: dict[str, Any]) -> ScriptedTurn:
        # the agent's sandbox is frozen while the model thinks: remove it on the second turn
        turns["asked"] += 1
        if turns["asked"] == 2:
            for row in get_backend().leftovers():
                if row.run == run_id() and row.kind == "sandbox" and frozen(row.id):
                    get_backend().remove(row)
        command = json.dumps({"command": "git grep -n fetch_json"})
        return ScriptedTurn(
            reasoning="Look first.", tool_calls=[ScriptedToolCall(name="bash", arguments=command)]
        )

    entries = [e for e in load_repo_list(repos) if e.name == "billing"]
    with K3Server(losing_script) as server:
        priced = f"{server.base_url}#input=1&cached_input=0.1&output=2"
        (result,) = await run_refactor(entries, RENAME, priced, out=tmp_path / "j")
    assert result.outcome == "error" and "SandboxUnavailable" in (result.error or "")
    assert turns["asked"] == 2 and result.prompt_tokens > 0 and result.cost_usd > 0
    figures = json.loads((tmp_path / "j" / "summary.json").read_text())
    assert figures["cost_usd"] == pytest.approx(result.cost_usd)


def test_max_cost_stops_new_repos_and_a_higher_cap_finishes_the_job(
    repos: Path, tmp_path: Path
) -> None:
    listing = tmp_path / "repos.txt"
    listing.write_text("repos/billing\nrepos/docs-site test='python3 -m pytest -q test_pages.py'\n")
    job = tmp_path / "job"
    submit = ScriptedTurn(
        reasoning="Nothing to do.",
        tool_calls=[ScriptedToolCall(name="submit", arguments='{"summary": "none"}')],
    )
    with K3Server([submit]) as server:
        model = f"{server.base_url}#input=1&output=2"
        args = ["--repos", str(listing), "--instruction", RENAME, "--model", model]
        args += ["--concurrency", "1", "--out", str(job)]

        def cli(*extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "agentenv", "refactor", *args, *extra],
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "COLUMNS": "250"},
            )

        stopped = cli("--max-cost", "0.000001")
        assert stopped.returncode == 3, stopped.stderr
        assert len(load_report(job)) == 1 and len(server.requests) == 1
        assert "1 repos not started" in stopped.stderr and "Traceback" not in stopped.stderr
        assert "higher --max-cost" in stopped.stderr

        done = cli("--max-cost", "100")
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 2 and "stopped" not in done.stderr
        assert f"to read it: agentenv view {job}" in done.stdout
    report = load_report(job)
    assert set(report) == {"billing", "docs-site"}
    assert all(r.cost_usd > 0 and r.outcome == "no-change" for r in report.values())
    figures = json.loads((job / "summary.json").read_text())
    assert figures["cost_usd"] == pytest.approx(sum(r.cost_usd for r in report.values()))


async def test_bad_repos_get_clear_outcomes_and_the_job_goes_on(
    repos: Path, tmp_path: Path
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "notests").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path / "notests")], check=True)
    (tmp_path / "notests" / "a.txt").write_text("x")
    git(tmp_path / "notests", "add", "-A")
    git(tmp_path / "notests", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x")
    (repos / "billing" / "billing.py").write_text("broken uncommitted edit\n")  # dirty
    listing = tmp_path / "repos.txt"
    listing.write_text(
        "# one per line\n"
        "repos/billing\n"
        "plain\n"
        "notests\n"
        "repos/docs-site test='python3 -m pytest -q test_pages.py' name=docs\n"
    )
    results = {
        r.repo: r
        for r in await run_refactor(load_repo_list(listing), RENAME, CODEMOD, out=tmp_path / "j")
    }
    assert results["billing"].outcome == "changed-green"
    assert any(
        "uncommitted changes; used the committed state" in n for n in results["billing"].notes
    )
    assert results["plain"].outcome == "error" and "not a git repository" in str(
        results["plain"].error
    )
    assert results["notests"].outcome == "error" and "no test command found" in str(
        results["notests"].error
    )
    assert results["docs"].outcome == "no-change" and results["docs"].notes == []
    with pytest.raises(RepoError, match=r"repos\.txt:2: 'colour=blue' is not one of"):
        (tmp_path / "repos.txt").write_text("plain\nplain colour=blue\n")
        load_repo_list(listing)


def test_sigkill_mid_job_then_resume_does_each_repo_once(repos: Path, tmp_path: Path) -> None:
    job = tmp_path / "job"
    slow = CODEMOD.replace("command:", "command:sleep 1; ")
    argv = [
        sys.executable,
        "-m",
        "agentenv",
        "refactor",
        "--repos",
        str(repos),
        "--instruction",
        RENAME,
        "--model",
        slow,
        "--concurrency",
        "1",
        "--out",
        str(job),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        report = job / "report.jsonl"
        if report.exists() and report.read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = load_report(job)
    assert 1 <= len(before) < 4
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "200"}
    )
    assert done.returncode == 0, done.stderr
    lines = read_lines(job / "report.jsonl", RepoResult)
    assert sorted(r.repo for r in lines) == ["billing", "docs-site", "legacy", "reports"]
    for name, result in before.items():
        assert load_report(job)[name] == result


def test_a_patch_that_does_not_apply_is_reported(repos: Path) -> None:
    (entry,) = [e for e in load_repo_list(repos) if e.name == "billing"]
    commit = git(repos / "billing", "rev-parse", "HEAD").strip()
    good = git(repos / "billing", "diff", "HEAD~1", "HEAD", "--", "billing.py").encode()
    assert patch_applies(entry, git(repos / "billing", "rev-parse", "HEAD~1").strip(), good) is None
    stale = (
        b"diff --git a/billing.py b/billing.py\n--- a/billing.py\n+++ b/billing.py\n"
        b"@@ -1,1 +1,1 @@\n-from somewhere_else import fetch_json\n"
        b"+from http_util import get_json\n"
    )
    reason = patch_applies(entry, commit, stale)
    assert reason is not None and "patch does not apply" in reason


async def test_a_patch_bigger_than_command_output_is_kept_whole(
    repos: Path, tmp_path: Path
) -> None:
    entries = [e for e in load_repo_list(repos) if e.name == "billing"]
    big = "command:python3 -c \"open('data.txt','w').write('x' * 2_000_000)\""
    (result,) = await run_refactor(entries, "Add the data file.", big, out=tmp_path / "j")
    assert result.outcome == "changed-green", result.error
    patch = (tmp_path / "j" / "patches" / "billing.patch").read_bytes()
    assert len(patch) > 2_000_000 and b"elided" not in patch
