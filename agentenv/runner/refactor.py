"""Refactor jobs: one instruction, many repos, one verified patch per repo.

Per repo, through the one episode lifecycle: the committed state of its branch (with
``.git``) is the prepared workspace; its tests run first in a checker sandbox (a repo that is
red before we touch it is reported as such, and the agent is not run); the agent runs in its
own sandbox; everything it changed is taken as one binary ``git diff`` against the starting
commit (new files included, even if the agent committed); on the host the patch is applied to
a fresh clone of that commit, and the tests run on exactly that tree in a new checker
sandbox, as the agent's user. The job folder holds
``config.json``, ``report.jsonl`` (one fsynced line per repo, resumable like eval jobs),
``patches/<repo>.patch``, ``trajectories/<repo>.json`` and ``summary.md``.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import anyio
import structlog
from pydantic import BaseModel, Field

from agentenv.agent.loop import Limits, Spend, run_episode
from agentenv.runner.episode import (
    Prepared,
    prepare,
    release,
    start_sandbox,
    verify_workspace,
    workspace_tar,
)
from agentenv.runner.journal import (
    JobSettings,
    append_line,
    check_config,
    read_lines,
    write_atomic,
)
from agentenv.runner.outcomes import classify
from agentenv.runner.policy import Policies
from agentenv.runner.repos import (
    RepoEntry,
    RepoError,
    apply_patch,
    clone_committed,
    create_branch,
    detect_test_command,
)
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import Task
from agentenv.verify import CommandCheck, Score

log = structlog.get_logger(__name__)
REPORT = "report.jsonl"
PATCH_FILE = "/tmp/agentenv-change.patch"  # in the sandbox, outside the repo
# caches that running code leaves behind; never part of a patch
JUNK = "':(exclude,glob)**/__pycache__/**' ':(exclude,glob)**/.pytest_cache/**'"
WORKDIR = "/workspace"
RepoOutcome = Literal[
    "changed-green", "changed-red", "baseline-red", "no-change", "patch-conflict", "error"
]


class TestRun(BaseModel):
    """One run of a repo's tests."""

    command: str
    exit_code: int
    passed: int | None = None  # counts when the output says (pytest-style summaries)
    failed: int | None = None
    duration_s: float = 0.0
    tail: str = ""

    @property
    def green(self) -> bool:
        """Whether the tests passed."""
        return self.exit_code == 0


class RepoResult(Spend):
    """What happened to one repo."""

    repo: str
    path: str
    outcome: RepoOutcome
    branch: str | None = None
    commit: str | None = None
    notes: list[str] = Field(default_factory=list)
    test_command: str | None = None
    before: TestRun | None = None
    after: TestRun | None = None
    patch: str | None = None  # relative to the job folder
    files_changed: int = 0
    insertions: int = 0
    deletions: int = 0
    error: str | None = None
    stop_reason: str | None = None
    turns: int = 0
    wall_s: float = 0.0
    applied: str | None = None  # the branch made by --apply


class RefactorConfig(JobSettings):
    """What must match for a re-run to resume a refactor job folder."""

    model: str
    instruction_sha256: str
    repos: dict[str, str]  # name → path, test command, image, branch
    max_turns: int


_COUNT = re.compile(r"(\d+) (passed|failed|errors?)\b")


def parse_counts(output: str) -> tuple[int | None, int | None]:
    """Passed and failed counts from a pytest-style summary line, if there is one."""
    found: dict[str, int] = {}
    for number, word in _COUNT.findall(output):
        key = "failed" if word.startswith("error") else word
        found[key] = found.get(key, 0) + int(number)
    if not found:
        return None, None
    return found.get("passed", 0), found.get("failed", 0)


def test_run(command: str, score: Score) -> TestRun:
    """A repo's test run from the checker sandbox's score of its test command."""
    check = score.checks[0] if score.checks else None
    detail = check.detail if check else (score.error or "")
    exit_code = check.exit_code if check and check.exit_code is not None else None
    if exit_code is None:  # timed out, or could not run at all
        exit_code = 124 if "timed out" in detail else 127
    passed, failed = parse_counts(detail[-4000:])
    return TestRun(
        command=command,
        exit_code=exit_code,
        passed=passed,
        failed=failed,
        duration_s=check.duration_s if check else 0.0,
        tail=detail[-2000:],
    )


def diff_stats(patch: str) -> tuple[int, int, int]:
    """Files changed, lines inserted, lines deleted."""
    files = patch.count("\ndiff --git ") + patch.startswith("diff --git ")
    plus = sum(1 for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    minus = sum(1 for ln in patch.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    return files, plus, minus


async def refactor_repo(
    entry: RepoEntry,
    instruction: str,
    policies: Policies,
    *,
    out: Path,
    limits: Limits,
    test_timeout_s: float = 900,
) -> RepoResult:
    """One repo, end to end, through the episode lifecycle: its tests on the committed
    state and on the committed state plus the agent's patch each run in a new checker
    sandbox, as the agent's user. Never raises for a problem of that repo (it is the
    outcome)."""
    started = time.monotonic()
    result = RepoResult(repo=entry.name, path=str(entry.path), outcome="error")
    try:
        with tempfile.TemporaryDirectory(prefix="agentenv-repo-") as tmp:
            clone = Path(tmp) / entry.name
            checkout = clone_committed(entry, clone)
            result.branch, result.commit = checkout.branch, checkout.commit
            if checkout.dirty:
                result.notes.append(
                    "the working tree has uncommitted changes; used the committed state of "
                    f"{checkout.branch} ({checkout.commit[:12]})"
                )
            command = entry.test or detect_test_command(clone)
            if command is None:
                result.error = (
                    "no test command found (no pytest tests, Makefile test target, "
                    "package.json test script, Cargo.toml or go.mod); give one with test=…"
                )
                return result
            result.test_command = command
            if entry.test is None:
                result.notes.append(f"test command detected: {command}")
            task = Task(
                id=re.sub(r"[^A-Za-z0-9._-]", "-", entry.name).lstrip(".-_") or "repo",
                instruction=instruction,
                image=entry.image or BASE_IMAGE,
                workdir=WORKDIR,
                limits=limits,
                verifier=CommandCheck(
                    kind="command", command=command, timeout_s=test_timeout_s, user="agent"
                ),
            )
            prepared = await prepare(task, workspace=clone)
            try:
                await _fill(result, prepared, entry, checkout.commit, policies, out, Path(tmp))
            finally:
                await release(prepared)
    except RepoError as e:
        result.outcome, result.error = "error", str(e)
    except Exception as e:  # the job goes on; the outcome table names what went wrong
        result.outcome, result.error = "error", f"{classify(e)}: {type(e).__name__}: {e}"
    finally:
        result.wall_s = time.monotonic() - started
    return result


async def _fill(
    result: RepoResult,
    prepared: Prepared,
    entry: RepoEntry,
    commit: str,
    policies: Policies,
    out: Path,
    tmp: Path,
) -> None:
    assert result.test_command is not None
    task = prepared.task
    result.before = test_run(
        result.test_command, await verify_workspace(prepared, prepared.workspace)
    )
    if not result.before.green:
        result.outcome = "baseline-red"
        return
    async with await start_sandbox(prepared) as box:
        traj = await run_episode(
            policies.for_task(task), box, task.instruction, task_id=task.id, limits=task.limits
        )
        result.stop_reason, result.turns = traj.stop_reason, len(traj.turns)
        for name, value in Spend.of(traj).items():
            setattr(result, name, value)
        write_atomic(out / "trajectories" / f"{entry.name}.json", traj.model_dump_json().encode())
        # flags the agent may have set to hide changes from git are cleared first; the diff
        # goes to a file (a command's output is capped, a patch must not be)
        diff = await box.exec(
            "git ls-files -z | xargs -0 -r git update-index --no-skip-worktree"
            f" --no-assume-unchanged && git add -A -- . {JUNK}"
            f" && git diff --cached --binary {commit} > {PATCH_FILE}",
            cwd=WORKDIR,
            timeout=300,
        )
        if not diff.ok:
            raise RepoError(f"could not collect the change: {diff.stderr.strip()[-500:]}")
        patch = await box.read_file(PATCH_FILE)
    if not patch.strip():
        result.outcome = "no-change"
        return
    result.patch = f"patches/{entry.name}.patch"
    write_atomic(out / result.patch, patch)
    result.files_changed, result.insertions, result.deletions = diff_stats(
        patch.decode(errors="replace")
    )
    # the tests run on the starting commit plus the patch alone, as the repo will get it,
    # in a new checker sandbox: nothing else of the agent's sandbox crosses over
    patched = tmp / "patched"
    conflict = apply_patch(entry, commit, patch, patched)
    if conflict is not None:
        result.outcome, result.error = "patch-conflict", conflict
        return
    after = await verify_workspace(prepared, workspace_tar(patched, prepared.agent_user))
    result.after = test_run(result.test_command, after)
    result.outcome = "changed-green" if result.after.green else "changed-red"


def load_report(out: Path, *, repair: bool = False) -> dict[str, RepoResult]:
    """The finished repos of a job folder, by name (``repair``: see ``read_lines``)."""
    return {r.repo: r for r in read_lines(out / REPORT, RepoResult, repair=repair)}


async def run_refactor(
    repos: list[RepoEntry],
    instruction: str,
    model: str,
    *,
    out: Path,
    concurrency: int = 4,
    limits: Limits | None = None,
    on_done: Callable[[RepoResult], None] | None = None,
) -> list[RepoResult]:
    """Run the job over every repo that ``out`` has no result for yet; write the summary."""
    config = RefactorConfig(
        model=model,
        instruction_sha256=hashlib.sha256(instruction.encode()).hexdigest(),
        repos={r.name: f"{r.path} test={r.test} image={r.image} branch={r.branch}" for r in repos},
        max_turns=(limits or Limits()).max_turns,
    )
    policies = Policies(model)  # a missing key fails here, before the folder is touched
    check_config(out, config)
    done = load_report(out, repair=True)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(entry: RepoEntry) -> None:
        async with limiter:
            result = await refactor_repo(
                entry, instruction, policies, out=out, limits=limits or Limits()
            )
        append_line(out / REPORT, result)
        done[entry.name] = result
        log.info("refactor.repo", repo=entry.name, outcome=result.outcome)
        if on_done is not None:
            on_done(result)

    try:
        async with anyio.create_task_group() as tg:
            for entry in repos:
                if entry.name not in done:
                    tg.start_soon(one, entry)
    finally:
        await policies.aclose()
    results = [done[r.name] for r in repos if r.name in done]
    write_atomic(out / "summary.md", summary_markdown(results, model).encode())
    return results


def apply_patches(repos: list[RepoEntry], out: Path, job: str) -> dict[str, str]:
    """For every ``changed-green`` repo, make the branch ``agentenv/<job>`` holding its patch
    as one commit; returns repo → branch. The user's working tree is left alone."""
    by_name = {r.name: r for r in repos}
    made = {}
    for name, result in load_report(out).items():
        if result.outcome != "changed-green" or result.patch is None or name not in by_name:
            continue
        assert result.commit is not None
        branch = f"agentenv/{job}"
        patch = (out / result.patch).read_bytes()
        message = f"agentenv refactor {job}\n\nVerified: `{result.test_command}` passes."
        create_branch(by_name[name], result.commit, patch, branch, message)
        made[name] = branch
    return made


def summary_markdown(results: list[RepoResult], model: str) -> str:
    """The job's report as a Markdown table."""

    def tests(run: TestRun | None) -> str:
        if run is None:
            return "—"
        counts = f" ({run.passed} passed, {run.failed} failed)" if run.passed is not None else ""
        return ("green" if run.green else f"red, exit {run.exit_code}") + counts

    lines = [
        f"# Refactor report ({model})",
        "",
        "| repo | outcome | tests before | tests after | diff | tokens in/out | $ | notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        diff = f"{r.files_changed} files, +{r.insertions} −{r.deletions}" if r.patch else "—"
        notes = "; ".join([*r.notes, *([r.error] if r.error else [])]).replace("|", "\\|")
        lines.append(
            f"| {r.repo} | {r.outcome} | {tests(r.before)} | {tests(r.after)} | {diff} | "
            f"{r.prompt_tokens:,}/{r.completion_tokens:,} | {r.cost_usd:.4f} | {notes} |"
        )
    counts: dict[str, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    lines += ["", ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))]
    return "\n".join(lines) + "\n"
