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

import difflib
import functools
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Literal

import anyio
from pydantic import BaseModel, Field

from agentenv import scratch
from agentenv.agent.trajectory import Limits, Spend, Trajectory
from agentenv.errors import JobStopped
from agentenv.harnesses.base import Harness
from agentenv.log import get_logger
from agentenv.refactor.repos import (
    BranchMade,
    RepoEntry,
    RepoError,
    apply_patch,
    clone_committed,
    create_branch,
    detect_test_command,
    git,
    ref_format_problem,
)
from agentenv.refactor.verdict import (
    TEST_TIMEOUT_S,
    TestRun,
    lost_tests,
    test_run,
    verdict_files,
)
from agentenv.runner.budget import Budget, Metered, with_earlier_spend
from agentenv.runner.episode import (
    Prepared,
    episode,
    play_episode,
    prepare,
    release,
    verify_workspace,
)
from agentenv.runner.harness import check_agent
from agentenv.runner.journal import (
    CONFIG,
    JobSettings,
    append_line,
    check_config,
    read_lines,
    write_atomic,
)
from agentenv.runner.outcomes import classify
from agentenv.runner.policy import Policies, check_endpoints
from agentenv.runner.workspace import workspace_tar
from agentenv.sandbox import FileTooLarge, default_backend, recycling
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import Task
from agentenv.verify import CommandCheck

log = get_logger(__name__)
REPORT = "report.jsonl"
PATCH_FILE = "/tmp/agentenv-change.patch"  # in the sandbox, outside the repo
MAX_PATCH = 512 << 20  # bytes of a change taken into the runner: past it, the repo errs
# caches that running code leaves behind; never part of a patch
JUNK = "':(exclude,glob)**/__pycache__/**' ':(exclude,glob)**/.pytest_cache/**'"
WORKDIR = "/workspace"
RepoOutcome = Literal[
    "changed-green", "changed-red", "baseline-red", "no-change", "patch-conflict", "error"
]
SOLVED = "changed-green"


class RepoResult(Spend):
    """What happened to one repo."""

    repo: str
    slug: str | None = None  # names the repo's files in the job folder
    path: str
    outcome: RepoOutcome
    branch: str | None = None
    commit: str | None = None
    notes: list[str] = Field(default_factory=list)
    test_command: str | None = None
    test_reason: str | None = None  # why that command: given with test=…, or what detection saw
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

    @property
    def why(self) -> str:
        """Why the repo is not ``changed-green``, in a few lines ("" when it is)."""
        if self.error:
            return self.error
        run = self.after if self.outcome == "changed-red" else self.before
        if self.outcome in ("changed-red", "baseline-red") and run is not None:
            return run.why_red()
        return ""


class RefactorConfig(JobSettings):
    """What must match for a re-run to resume a refactor job folder. Repos may be added
    (the job takes them on); a listed repo's settings, the model, the instruction and the
    turn limit may not change."""

    UNCOMPARED = ("instruction",)
    JOURNAL: ClassVar[str] = REPORT
    ITEMS: ClassVar[str] = "repos"
    ITEM_KEY: ClassVar[str] = "repo"

    kind: Literal["refactor"] = "refactor"  # marks the folder as a refactor job's
    model: str
    instruction_sha256: str
    repos: dict[str, str]  # name → path, test command, image, branch
    max_turns: int
    instruction: str | None = None  # the text, to show what changed (older folders lack it)
    # the harness that plays each repo's episode (``--agent``); None: the built-in loop
    agent: str | None = None

    def differences(self, before: JobSettings) -> list[str]:
        """What differs from ``before``: long values as a short diff, repos added not at all."""
        assert isinstance(before, RefactorConfig)
        out = []
        if self.model != before.model:
            out.append(f"--model changed: {changed(before.model, self.model)}")
        if self.instruction_sha256 != before.instruction_sha256:
            if before.instruction is not None and self.instruction is not None:
                out.append(
                    f"the instruction changed: {changed(before.instruction, self.instruction)}"
                )
            else:
                out.append(
                    f"the instruction changed (sha256 {before.instruction_sha256[:12]} then, "
                    f"{self.instruction_sha256[:12]} now)"
                )
        for name, then in before.repos.items():
            now = self.repos.get(name)
            if now is None:
                out.append(f"repo {name!r} is no longer listed (list it again to resume)")
            elif now != then:
                out.append(f"repo {name!r} changed: {changed(then, now)}")
        same = {"model", "instruction_sha256", "repos", "instruction"}
        rest = before.model_copy(update={k: getattr(self, k) for k in same})
        return out + super().differences(rest)


def summarise(text: str, limit: int = 60) -> str:
    """A long or multi-line value (a 90-line codemod, an instruction) as one short line:
    its first line, cut, then its size and a hash to tell versions apart."""
    lines = text.strip().splitlines() or [""]
    if len(lines) == 1 and len(lines[0]) <= limit:
        return lines[0]
    first = lines[0] if len(lines[0]) <= limit else lines[0][: limit - 1] + "…"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    size = ""
    if len(lines) > 1:
        size = f"{len(lines)} lines, "
        first += "" if first.endswith("…") else " …"
    return f"{first} ({size}{len(text)} chars, sha256 {digest})"


def changed(then: str, now: str, max_lines: int = 12) -> str:
    """What changed from ``then`` to ``now``: both, if short; else a unified diff of the
    lines that differ (one line of context, capped)."""
    if "\n" not in then + now and len(then) + len(now) <= 160:
        return f"{then!r} then, {now!r} now"
    diff = list(
        difflib.unified_diff(then.splitlines(), now.splitlines(), "then", "now", lineterm="", n=1)
    )[2:]
    shown = [ln if len(ln) <= 160 else ln[:159] + "…" for ln in diff[:max_lines]]
    if len(diff) > max_lines:
        shown.append(f"… ({len(diff) - max_lines} more diff lines)")
    return "\n" + "\n".join(shown)


def diff_stats(patch: str) -> tuple[int, int, int]:
    """Files changed, lines inserted, lines deleted."""
    files = patch.count("\ndiff --git ") + patch.startswith("diff --git ")
    plus = sum(1 for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    minus = sum(1 for ln in patch.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    return files, plus, minus


def command_failure(traj: Trajectory) -> str | None:
    """Why a ``command:`` policy's command failed (its exit code or timeout and the tail of
    its output, as the trajectory recorded them), or ``None`` if it succeeded."""
    for turn in traj.turns:
        for r in turn.tool_results:
            if r.name == "bash" and r.error:
                timed = re.search(r"\[timed out after ([\d.]+) s", r.output)
                how = f"timed out after {timed.group(1)} s" if timed else f"exit {r.exit_code}"
                tail = re.sub(r"\n?\[exit code -?\d+\]\s*$", "", r.output.strip())[-1500:].strip()
                return f"the codemod failed ({how})" + (f": {tail}" if tail else "")
    return None


async def refactor_repo(
    entry: RepoEntry,
    instruction: str,
    policies: Policies,
    *,
    out: Path,
    limits: Limits,
    test_timeout_s: float = TEST_TIMEOUT_S,
    backend: str | None = None,
    harness: Harness | None = None,
) -> RepoResult:
    """One repo, end to end, through the episode lifecycle: its tests on the committed
    state and on the committed state plus the agent's patch each run in a new checker
    sandbox, as the agent's user. Its sandboxes are ``backend``'s (the default one for
    ``None``); ``harness`` plays its episode (``None``: the built-in loop). Never raises
    for a problem of that repo (it is the outcome)."""
    started = time.monotonic()
    result = RepoResult(repo=entry.name, slug=entry.slug, path=str(entry.path), outcome="error")
    try:
        with scratch.folder("repo") as tmp:
            clone = Path(tmp) / "repo"
            checkout = clone_committed(entry, clone)
            result.branch, result.commit = checkout.branch, checkout.commit
            if checkout.note:
                result.notes.append(checkout.note)
            if checkout.dirty:
                result.notes.append(
                    "the working tree has uncommitted changes; used the committed state "
                    f"({checkout.commit[:12]})"
                )
            if entry.test is not None:
                command, result.test_reason = entry.test, "given with test=…"
            else:
                detected = detect_test_command(clone)
                if detected is None:
                    result.error = (
                        "no test command found (no Makefile test target, package.json test "
                        "script, Cargo.toml, go.mod, tox/nox pytest command, pytest settings "
                        "or test_*.py files); give one with test=…"
                    )
                    return result
                command, result.test_reason = detected.command, detected.reason
                result.notes.append(f"test command detected: {command}")
            result.test_command = command
            task = Task(
                id=entry.slug,
                instruction=instruction,
                image=entry.image or BASE_IMAGE,
                workdir=WORKDIR,
                limits=limits,
                verifier=CommandCheck(
                    kind="command", command=command, timeout_s=test_timeout_s, user="agent"
                ),
            )
            prepared = await prepare(task, workspace=clone, backend=backend)
            try:
                await _fill(
                    result, prepared, entry, checkout.commit, policies, out, Path(tmp), harness
                )
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
    harness: Harness | None = None,
) -> None:
    assert result.test_command is not None
    task = prepared.task
    assert isinstance(task.verifier, CommandCheck)
    timeout_s = task.verifier.timeout_s
    result.before = test_run(
        result.test_command, await verify_workspace(prepared, prepared.workspace), timeout_s
    )
    if not result.before.green:
        result.outcome = "baseline-red"
        return
    # the same episode as every driver's, ended by the same teardown; no checker made
    # ahead (the tests run on the patch, once made) and the sandbox never recycled
    async with episode(prepared, ahead=False, reusable=False, harness=harness) as ep:
        box = ep.sandbox
        traj = await play_episode(
            ep,
            Metered(policies.for_task(task), result),  # paid turns count if the rest fails
        )
        result.stop_reason, result.turns = traj.stop_reason, len(traj.turns)
        write_atomic(out / "trajectories" / f"{entry.slug}.json", traj.model_dump_json().encode())
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
        try:  # bounded: a process the agent left can swap the file for a huge one
            patch = await box.read_file(PATCH_FILE, max_bytes=MAX_PATCH)
        except FileTooLarge as e:
            raise RepoError(f"the change is too large to keep: {e}") from e
    if patch.strip():  # kept even when the codemod failed: it shows how far it got
        result.patch = f"patches/{entry.slug}.patch"
        write_atomic(out / result.patch, patch)
        result.files_changed, result.insertions, result.deletions = diff_stats(
            patch.decode(errors="replace")
        )
    # a codemod that failed is an error whatever it left behind: half a change is not one
    failed = command_failure(traj) if policies.spec.startswith("command:") else None
    if failed is not None:
        result.outcome, result.error = "error", failed
        return
    if not patch.strip():
        result.outcome = "no-change"
        return
    # the tests run on the starting commit plus the patch alone, as the repo will get it,
    # in a new checker sandbox: nothing else of the agent's sandbox crosses over
    patched = tmp / "patched"
    conflict = apply_patch(entry, commit, patch, patched)
    if conflict is not None:
        result.outcome, result.error = "patch-conflict", conflict
        return
    # the patch may edit what decides its own verdict (tests, their settings, the build
    # file): legitimate in a refactor, and what an agent that broke the code would do
    deciding = verdict_files(git(patched, "diff", "--cached", "--name-only", "-z").split("\0"))
    if deciding:
        shown = ", ".join(deciding[:8]) + (
            f" (+{len(deciding) - 8} more)" if len(deciding) > 8 else ""
        )
        result.notes.append(f"the change edits files that decide the verdict: {shown}")
    after = await verify_workspace(prepared, workspace_tar(patched, prepared.agent_user))
    result.after = test_run(result.test_command, after, timeout_s)
    result.outcome = "changed-green" if result.after.green else "changed-red"
    lost = lost_tests(result.before, result.after)
    if lost is not None:
        result.outcome, result.error = "changed-red", lost


def load_report(out: Path, *, repair: bool = False) -> dict[str, RepoResult]:
    """The finished repos of a job folder, by name (``repair``: see ``read_lines``)."""
    return {r.repo: r for r in read_lines(out / REPORT, RepoResult, repair=repair)}


def refactor_config(
    repos: list[RepoEntry],
    instruction: str,
    model: str,
    limits: Limits | None = None,
    *,
    agent: str | None = None,
) -> RefactorConfig:
    """What the job is: what a folder's ``config.json`` must match for a run to resume it
    (``agent``, the harness that plays: a resume uses the same)."""
    return RefactorConfig(
        agent=agent,
        model=model,
        instruction_sha256=hashlib.sha256(instruction.encode()).hexdigest(),
        repos={r.name: f"{r.path} test={r.test} image={r.image} branch={r.branch}" for r in repos},
        max_turns=(limits or Limits()).max_turns,
        instruction=instruction,
    )


async def run_refactor(
    repos: list[RepoEntry],
    instruction: str,
    model: str,
    *,
    out: Path,
    concurrency: int = 4,
    limits: Limits | None = None,
    on_done: Callable[[RepoResult], None] | None = None,
    test_timeout_s: float = TEST_TIMEOUT_S,
    command_timeout_s: float = 1800.0,
    budget: Budget | None = None,
    retry_errors: bool = False,
    redo_changed: bool = False,
    backend: str | None = None,
    agent: str | None = None,
) -> list[RepoResult]:
    """Run the job over every repo that ``out`` has no result for yet (a folder started with
    fewer repos takes on the new ones); write ``summary.md`` and ``summary.json``. The
    timeouts (a test run's; a ``command:`` policy's command) may change between runs.

    With a ``budget`` no repo starts once the job (earlier runs included: the budget is
    charged with them here) has spent its cap; running ones finish, and ``budget.refused``
    counts the repos left for a later run.

    ``retry_errors``: run again the repos whose last result is an ``error`` (what they
    spent before stays counted, in their new line). ``redo_changed``: when the repos whose
    settings changed are all that differs, drop their results and run them again (see
    ``check_config``). Every sandbox is ``backend``'s (the default one for ``None``).
    ``agent``: the harness that plays each repo's episode (``None``: the built-in loop);
    checked installable here and playable by ``model`` before anything runs.

    Raises :class:`JobStopped` (resumable) when the model endpoint stops answering mid-job:
    the repos it cut off and those not started have no line, so running the job again
    runs them."""
    config = refactor_config(repos, instruction, model, limits, agent=agent)
    harness = await anyio.to_thread.run_sync(
        functools.partial(check_agent, agent, backend=backend or default_backend(), model=model)
    )
    # a missing key fails here, before the folder is touched
    policies = Policies(model, command_timeout_s=command_timeout_s)
    try:
        await check_endpoints(policies)  # a dead endpoint stops the job before any repo
    except BaseException:
        await policies.aclose()
        raise
    check_config(out, config, redo_changed=redo_changed)
    # the settings matched: record the repo set (it may have grown) and the instruction
    write_atomic(out / CONFIG, config.model_dump_json(indent=1).encode())
    done = load_report(out, repair=True)
    limiter = anyio.CapacityLimiter(concurrency)
    if budget is not None:
        budget.spend(sum(r.cost_usd for r in done.values()))
    errored = {name: r for name, r in done.items() if retry_errors and r.outcome == "error"}
    done = {name: r for name, r in done.items() if name not in errored}

    stopped: list[JobStopped] = []

    async def one(entry: RepoEntry, scope: anyio.CancelScope) -> None:
        async with limiter:
            if budget is not None and not await budget.admit():
                return
            result = await refactor_repo(
                entry,
                instruction,
                policies,
                out=out,
                limits=limits or Limits(),
                test_timeout_s=test_timeout_s,
                backend=backend,
                harness=harness,
            )
        down = policies.down() if (result.error or "").startswith("endpoint_down") else None
        if down is not None:
            # nobody answers: every repo would wait out its retries alike. No line for this
            # one and none started after it (a resume runs them), as an eval job stops
            stopped.append(JobStopped(f"the model endpoint {down}", resumable=True))
            scope.cancel()
            return
        new_usd = result.cost_usd  # what this run spent (the earlier runs are counted)
        result = with_earlier_spend(result, errored.get(entry.name))
        append_line(out / REPORT, result)
        done[entry.name] = result
        if budget is not None:
            budget.spend(new_usd)
        log.info("refactor.repo", repo=entry.name, outcome=result.outcome)
        if on_done is not None:
            on_done(result)

    try:
        async with recycling(), anyio.create_task_group() as tg:
            for entry in repos:
                if entry.name not in done:
                    tg.start_soon(one, entry, tg.cancel_scope)
    finally:
        await policies.aclose()
    last = {**errored, **done}  # a repo to run again but not run (the budget) is as it was
    results = [last[r.name] for r in repos if r.name in last]
    write_atomic(
        out / "summary.md", summary_markdown(results, model, instruction, agent=agent).encode()
    )
    write_atomic(out / "summary.json", json.dumps(summary_json(results), indent=1).encode())
    if stopped:
        raise stopped[0]
    return results


def commit_message(job: str, instruction: str, result: RepoResult, model: str | None) -> str:
    """The --apply commit's message: the instruction (cut when long) and what verified it."""
    # a subject line as git tools expect it: the instruction's first line, cut at 72
    first = instruction.strip().splitlines()[0].strip() if instruction.strip() else job
    if len(first) > 72:
        first = first[:71].rstrip() + "…"
    body = instruction.strip()
    if len(body) > 2000:
        body = body[:2000].rstrip() + f"\n… ({len(instruction) - 2000} more characters)"
    counts = ""
    if result.after is not None and result.after.passed is not None:
        counts = f" ({result.after.passed} passed)"
    made_by = f"\nMade by: {summarise(model)}" if model else ""
    return (
        f"{first}\n\n{body}\n\n"
        f"Verified: `{result.test_command}` passes{counts} on this commit and on its parent.\n"
        f"agentenv refactor job: {job}{made_by}\n"
    )


class Applied(BaseModel):
    """What --apply did for one repo: the branch, or why not."""

    repo: str
    made: BranchMade | None = None
    error: str | None = None


def apply_patches(
    repos: list[RepoEntry], out: Path, job: str, instruction: str | None = None
) -> list[Applied]:
    """For every ``changed-green`` repo, make a branch ``agentenv/<job>`` holding its patch
    as one commit, by the user's git identity, with the instruction (from the job's config
    unless given) in the message. One repo's failure does not stop the others; no existing
    branch is moved (see :func:`~agentenv.refactor.repos.create_branch`). The user's working
    tree is left alone."""
    branch = f"agentenv/{job}"
    problem = ref_format_problem(branch)
    if problem is not None:
        raise RepoError(f"--apply: {problem} (it is made from the job folder's name)")
    config_path = out / CONFIG
    config = (
        RefactorConfig.model_validate_json(config_path.read_text())
        if config_path.exists()
        else None
    )
    text = instruction or (config.instruction if config else None) or ""
    by_name = {r.name: r for r in repos}
    done = []
    for name, result in load_report(out).items():
        if result.outcome != SOLVED or result.patch is None or name not in by_name:
            continue
        assert result.commit is not None
        try:
            patch = (out / result.patch).read_bytes()
            message = commit_message(job, text, result, config.model if config else None)
            made = create_branch(by_name[name], result.commit, patch, branch, message)
            done.append(Applied(repo=name, made=made))
        except (RepoError, OSError) as e:
            done.append(Applied(repo=name, error=str(e)))
    return done


def md(text: str) -> str:
    """``text`` made safe for one Markdown table cell: pipes, backticks and other markup
    escaped, line breaks as ``<br>``."""
    text = re.sub(r"([\\`*_\[\]<>|~])", r"\\\1", text.strip())
    return re.sub(r"\r?\n", "<br>", text)


def outcome_counts(results: list[RepoResult]) -> dict[str, int]:
    """How many repos ended in each outcome, by outcome name."""
    return dict(sorted(Counter(r.outcome for r in results).items()))


def per_solved(results: list[RepoResult]) -> tuple[int, float, float | None]:
    """Repos solved (``changed-green``), dollars spent, and dollars per solved repo."""
    solved = sum(r.outcome == SOLVED for r in results)
    cost = sum(r.cost_usd for r in results)
    return solved, cost, (cost / solved if solved else None)


def summary_json(results: list[RepoResult]) -> dict[str, object]:
    """The job's figures for programs: counts per outcome, tokens, dollars, $ per solved."""
    solved, cost, each = per_solved(results)
    return {
        "repos": len(results),
        "outcomes": outcome_counts(results),
        "solved": solved,
        "prompt_tokens": sum(r.prompt_tokens for r in results),
        "completion_tokens": sum(r.completion_tokens for r in results),
        "cost_usd": cost,
        "usd_per_solved": each,
        "by_repo": {r.repo: r.outcome for r in results},
    }


def totals_line(results: list[RepoResult]) -> str:
    """Counts per outcome, dollars and dollars per solved repo, on one line."""
    counts = ", ".join(f"{n} {o}" for o, n in outcome_counts(results).items())
    _, cost, each = per_solved(results)
    per = f"${each:.4f} per solved" if each is not None else "no repo solved"
    return f"{counts}; ${cost:.4f} ({per})"


def summary_markdown(
    results: list[RepoResult], model: str, instruction: str = "", *, agent: str | None = None
) -> str:
    """The job's report as a Markdown table (naming the ``agent`` that played, if not the
    built-in loop)."""
    played = f", played by {md(agent)}" if agent else ""
    lines = [f"# Refactor report ({md(summarise(model))}{played})", ""]
    if instruction:
        lines += [f"Instruction: {md(summarise(instruction, 120))}", ""]
    lines += [
        "| repo | outcome | tests before | tests after | diff | tokens in/out | $ | notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        diff = f"{r.files_changed} files, +{r.insertions} −{r.deletions}" if r.patch else "—"
        notes = [*r.notes]
        if r.test_reason and r.test_reason != "given with test=…":
            notes.append(f"why this command: {r.test_reason}")
        if r.why:
            notes.append(r.why)
        lines.append(
            f"| {md(r.repo)} | {r.outcome} | {r.before.verdict if r.before else '—'} | "
            f"{r.after.verdict if r.after else '—'} | {diff} | "
            f"{r.prompt_tokens:,}/{r.completion_tokens:,} | {r.cost_usd:.4f} | "
            f"{'<br>'.join(md(n) for n in notes)} |"
        )
    lines += ["", totals_line(results)]
    return "\n".join(lines) + "\n"
