"""Refactor jobs as a user drives them, on real repos built here and real sandboxes: the
instruction as text or file, names that cannot name files, empty lists, detached HEADs and
commits, --apply that never loses a commit, long settings summarised and diffed, jobs that
take on more repos, and dollars per solved repo."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv.errors import ConfigMismatch
from agentenv.refactor.job import apply_patches, load_report, run_refactor
from agentenv.refactor.repos import RepoEntry, git, load_repo_list
from tests.refactor.test_refactor_verdicts import ADD, TEST_ADD, make_repo

pytestmark = pytest.mark.anyio
SWAP = "command:sed -i 's/a + b/b + a/' calc.py"
CALC = {"calc.py": ADD, "test_calc.py": TEST_ADD.format(mod="calc")}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentenv", "refactor", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def test_cli_inputs_names_and_totals(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n\n")
    (tmp_path / "none").mkdir()
    for repos, says in ((empty, "lists no repos"), (tmp_path / "none", "no git repositories")):
        done = cli("--repos", str(repos), "--instruction", "x", "--model", SWAP)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr

    make_repo(tmp_path / "svc+a", CALC)
    make_repo(tmp_path / "b", CALC)
    listing = tmp_path / "repos.txt"
    listing.write_text("svc+a\nb name=team/x\n")
    long_text = "Swap the operands of add() so that b comes first. " * 8  # > 255 characters
    assert len(long_text) > 255
    out = tmp_path / "job"
    args = ["--repos", str(listing), "--model", SWAP, "--out", str(out)]
    done = cli(*args, "--instruction", long_text)
    assert done.returncode == 0, done.stderr
    *_, totals, report, view = done.stdout.strip().splitlines()
    assert totals == "2 changed-green; $0.0000 ($0.0000 per solved)", done.stdout
    assert report.startswith("report: ") and view.startswith("to read it: agentenv view ")
    assert {p.name for p in (out / "patches").iterdir()} == {"svc-a.patch", "team-x.patch"}
    assert {p.name for p in (out / "trajectories").iterdir()} == {"svc-a.json", "team-x.json"}
    summary = (out / "summary.md").read_text()
    assert "| svc+a | changed-green |" in summary and "| team/x | changed-green |" in summary
    figures = json.loads((out / "summary.json").read_text())
    assert figures["outcomes"] == {"changed-green": 2} and figures["solved"] == 2
    assert figures["cost_usd"] == 0 and figures["usd_per_solved"] == 0
    assert figures["by_repo"] == {"svc+a": "changed-green", "team/x": "changed-green"}

    # the same text from a file resumes the same job: nothing runs again
    (tmp_path / "instruction.md").write_text(long_text)
    done = cli(*args, "--instruction-file", str(tmp_path / "instruction.md"))
    assert done.returncode == 0, done.stderr
    assert (out / "report.jsonl").read_text().count("\n") == 2
    # --instruction naming a file reads it too; a different text is a different job
    done = cli(*args, "--instruction", str(tmp_path / "instruction.md"))
    assert done.returncode == 0, done.stderr
    done = cli(*args, "--instruction", "Something else entirely.")
    assert done.returncode == 2 and "the instruction changed" in done.stderr
    done = cli(*args)
    assert done.returncode == 2 and "--instruction TEXT or --instruction-file" in done.stderr

    # output and names are shown as text, never read as console markup
    fail = cli(
        "--repos", str(listing), "--instruction", "x", "--out", str(tmp_path / "fail"),
        "--model", "command:echo '[red]half[/] done' >&2; exit 3",
    )  # fmt: skip
    assert (
        fail.returncode == 5 and "error          svc+a  the codemod failed (exit 3)" in fail.stdout
    )
    assert "[stderr] | [red]half[/] done" in fail.stdout
    missing = cli("--repos", str(tmp_path / "[team].txt"), "--instruction", "x", "--model", SWAP)
    assert missing.returncode == 2 and "[team].txt: no such file or folder" in missing.stderr


async def test_detached_heads_tags_and_commits_are_taken(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", CALC)
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "v1")
    (repo / "NOTES").write_text("later\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "later")
    second = git(repo, "rev-parse", "HEAD").strip()
    ci = make_repo(tmp_path / "ci", CALC)  # a CI checkout: HEAD detached at a commit no branch has
    git(ci, "checkout", "-q", "--detach")
    (ci / "NOTES").write_text("ci\n")
    git(ci, "add", "-A")
    git(ci, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "ci only")
    detached = git(ci, "rev-parse", "HEAD").strip()
    listing = tmp_path / "repos.txt"
    listing.write_text(
        f"ci\nr name=by-sha branch={first[:10]}\nr name=by-tag branch=v1\n"
        "r name=by-branch branch=main\nr name=nope branch=no-such-thing\n"
    )
    results = {
        r.repo: r
        for r in await run_refactor(load_repo_list(listing), "Swap.", SWAP, out=tmp_path / "j")
    }
    assert {n: (r.outcome, r.commit, r.branch) for n, r in results.items()} == {
        "ci": ("changed-green", detached, None),
        "by-sha": ("changed-green", first, None),
        "by-tag": ("changed-green", first, None),
        "by-branch": ("changed-green", second, "main"),
        "nope": ("error", None, None),
    }
    assert any("HEAD is detached" in n for n in results["ci"].notes)
    assert any(f"started from commit {first[:12]}" in n for n in results["by-sha"].notes)
    assert "branch=no-such-thing is not a branch, tag or commit" in str(results["nope"].error)
    assert "NOTES" not in (tmp_path / "j" / "patches" / "by-sha.patch").read_text()


async def test_apply_keeps_every_commit_and_commits_as_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    ada = make_repo(tmp_path / "ada", CALC, user="Ada Lovelace <ada@example.com>")
    anon = make_repo(tmp_path / "anon", CALC)
    entries = [RepoEntry(path=ada, name="ada"), RepoEntry(path=anon, name="anon")]
    instruction = "Swap the operands of add().\n\nKeep the behaviour; b comes first."
    out = tmp_path / "swap-operands"
    await run_refactor(entries, instruction, SWAP, out=out)

    # an --out whose name cannot be a branch is refused before anything runs
    bad = tmp_path / "bad..name"
    done = cli(
        "--repos", str(tmp_path), "--instruction", "x", "--model", SWAP,
        "--out", str(bad), "--apply",
    )  # fmt: skip
    assert done.returncode == 2 and "not a valid git branch name" in done.stderr
    assert not bad.exists()

    made = {a.repo: a.made for a in apply_patches(entries, out, out.name)}
    assert made["ada"] is not None and made["anon"] is not None
    assert made["ada"].status == made["anon"].status == "created"
    branch = "agentenv/swap-operands"
    log = git(ada, "log", "-1", "--format=%an <%ae>|%cn|%B", branch)
    assert log.startswith("Ada Lovelace <ada@example.com>|Ada Lovelace|Swap the operands of add().")
    assert "b comes first." in log and "Verified: `python3 -m pytest -q` passes (1 passed)" in log
    assert git(anon, "log", "-1", "--format=%an", branch).strip() == "agentenv"
    assert "no git user.name/user.email set" in made["anon"].note

    # again: the branches already hold exactly this change, nothing is made
    tips = {r: git(p, "rev-parse", branch) for r, p in (("ada", ada), ("anon", anon))}
    again = {a.repo: a.made for a in apply_patches(entries, out, out.name)}
    assert {r: m.status for r, m in again.items() if m} == {"ada": "unchanged", "anon": "unchanged"}
    assert {r: git(p, "rev-parse", branch) for r, p in (("ada", ada), ("anon", anon))} == tips

    # someone builds on ada's branch; anon's repo is gone: ada gets a new branch, its
    # commits are kept, and anon's failure is reported without stopping ada
    git(ada, "checkout", "-q", branch)
    (ada / "more.txt").write_text("work on top\n")
    git(ada, "add", "-A")
    git(ada, "commit", "-qm", "more work")
    theirs = git(ada, "rev-parse", "HEAD").strip()
    subprocess.run(["rm", "-rf", str(anon)], check=True)
    third = {a.repo: a for a in apply_patches(entries, out, out.name)}
    assert third["anon"].made is None and "no such folder" in str(third["anon"].error)
    ada_made = third["ada"].made
    assert ada_made is not None and ada_made.status == "renamed"
    assert ada_made.branch == f"{branch}-2" and "already exists" in ada_made.note
    assert git(ada, "rev-parse", branch).strip() == theirs  # never moved
    assert git(ada, "rev-parse", f"{branch}-2~1").strip() == load_report(out)["ada"].commit


LONG_CODEMOD = "command:" + "".join(f"# step {i}: explain\n" for i in range(60)) + SWAP[8:]


async def test_long_settings_are_summarised_and_a_job_takes_on_more_repos(
    tmp_path: Path,
) -> None:
    a = RepoEntry(path=make_repo(tmp_path / "a", CALC), name="a")
    b = RepoEntry(path=make_repo(tmp_path / "b", CALC), name="b")
    out = tmp_path / "j"
    (first,) = await run_refactor([a], "Swap.", LONG_CODEMOD, out=out)
    assert first.outcome == "changed-green"
    title = (out / "summary.md").read_text().splitlines()[0]
    assert title.startswith("# Refactor report (command:# step 0: explain … (61 lines")
    assert "step 1" not in title and len(title) < 160

    with pytest.raises(ConfigMismatch) as caught:
        await run_refactor([a], "Swap.", LONG_CODEMOD.replace("step 30", "step 3O"), out=out)
    message = str(caught.value)
    assert "-# step 30: explain" in message and "+# step 3O: explain" in message
    assert "step 10" not in message and len(message.splitlines()) < 12

    # one more repo in the list: only it runs; a's result stays as it was
    both = await run_refactor([a, b], "Swap.", LONG_CODEMOD, out=out)
    assert [r.repo for r in both] == ["a", "b"] and both[0] == first
    assert (out / "report.jsonl").read_text().count("\n") == 2
    assert json.loads((out / "summary.json").read_text())["solved"] == 2

    changed = b.model_copy(update={"test": "python3 -m pytest -q -x"})
    for repos, instruction, says in (
        ([a, changed], "Swap.", "repo 'b' changed"),
        ([a], "Swap.", "repo 'b' is no longer listed"),
        ([a, b], "Swap them.", "the instruction changed: 'Swap.' then, 'Swap them.' now"),
    ):
        with pytest.raises(ConfigMismatch, match=says):
            await run_refactor(repos, instruction, LONG_CODEMOD, out=out)


def test_a_long_instruction_makes_a_git_subject_line_and_a_whole_body() -> None:
    from agentenv.refactor.job import RepoResult, commit_message

    instruction = "Rename the helper http_util.fetch_json to get_json everywhere, " * 3
    result = RepoResult(repo="a", path="/a", outcome="changed-green", test_command="make test")
    message = commit_message("job", instruction, result, "command:" + "x" * 500)
    subject, blank, body = message.split("\n", 2)
    assert len(subject) <= 72 and subject.endswith("…") and "sha256" not in subject
    assert blank == "" and body.startswith(instruction.strip())
    assert "Made by: command:xxx" in body and "(508 chars, sha256 " in body


def test_errors_exit_5_and_are_redone_on_request(tmp_path: Path) -> None:
    codemod = SWAP + "; if [ -f FAIL ]; then echo 'cannot parse' >&2; exit 3; fi"
    make_repo(tmp_path / "a", CALC)
    b = make_repo(tmp_path / "b", {**CALC, "FAIL": ""})
    listing = tmp_path / "repos.txt"
    listing.write_text("a\nb\n")
    out = tmp_path / "job"
    args = ["--repos", str(listing), "--instruction", "Swap.", "--model", codemod]
    args += ["--concurrency", "1", "--out", str(out)]

    def lines() -> list[dict[str, object]]:
        return [json.loads(line) for line in (out / "report.jsonl").read_text().splitlines()]

    first = cli(*args)
    assert first.returncode == 5, first.stderr
    message = " ".join(first.stderr.split())
    assert "1 repo ended in an error" in message, message
    assert f"to run it again: agentenv refactor {shlex.join(args)} --retry-errors" in message
    assert [(r["repo"], r["outcome"]) for r in lines()] == [("a", "changed-green"), ("b", "error")]
    a_line = lines()[0]
    plain = cli(*args)  # a plain resume keeps it
    assert plain.returncode == 5 and len(lines()) == 2, plain.stderr

    git(b, "rm", "-q", "FAIL")
    git(b, "-c", "user.name=U", "-c", "user.email=u@example.com", "commit", "-qm", "fixed")
    retried = cli(*args, "--retry-errors")
    assert retried.returncode == 0, retried.stderr
    assert [(r["repo"], r["outcome"]) for r in lines()][2:] == [("b", "changed-green")]
    assert "changed-green  b" in retried.stdout and "changed-green  a" not in retried.stdout

    # a repo's settings changed: the job says how to run just that repo again
    listing.write_text("a\nb test='python3 -m pytest -q -x'\n")
    before = (out / "report.jsonl").read_bytes()
    changed = cli(*args)
    assert changed.returncode == 2, changed.stderr
    message = " ".join(changed.stderr.split())
    assert "repo 'b' changed" in message and "add --redo-changed" in message, message
    assert (out / "report.jsonl").read_bytes() == before
    redone = cli(*args, "--redo-changed")
    assert redone.returncode == 0, redone.stderr
    assert "running the changed repos again (their earlier results dropped): b" in redone.stderr
    assert lines()[0] == a_line and [r["repo"] for r in lines()] == ["a", "b"]
    assert lines()[1]["test_command"] == "python3 -m pytest -q -x"
