"""Refactor jobs: ``refactor``."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.markup import escape

from agentenv import log
from agentenv.cli._app import (
    EXIT_CODES,
    AgentOption,
    ExitCode,
    _fail,
    _say_errors,
    _say_redone,
    app,
    backend_of,
    check_agent_or_exit,
    err,
    out,
)
from agentenv.errors import JobStopped, NoRoute

if TYPE_CHECKING:
    from agentenv.agent.loop import Limits
    from agentenv.refactor.job import RepoResult
    from agentenv.refactor.repos import RepoEntry


def _instruction_text(instruction: str | None, instruction_file: Path | None) -> str:
    """The instruction: ``--instruction-file``'s content, or ``--instruction`` (the content
    of the file it names, if it names an existing file; else the text itself)."""
    if (instruction is None) == (instruction_file is None):
        raise _fail("give the change to make with --instruction TEXT or --instruction-file FILE")
    if instruction_file is not None:
        try:
            text = instruction_file.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise _fail(f"--instruction-file {instruction_file}: {e}") from e
    else:
        assert instruction is not None
        try:  # a long text is not a file name: stat fails with "File name too long"
            is_file = Path(instruction).is_file()
        except (OSError, ValueError):
            is_file = False
        text = Path(instruction).read_text() if is_file else instruction
    if not text.strip():
        raise _fail("the instruction is empty")
    return text


@app.command(epilog=EXIT_CODES)
def refactor(
    ctx: typer.Context,
    repos: Annotated[
        Path,
        typer.Option(
            help="A file listing repos, one per line: PATH, then optionally test=… image=… "
            "branch=… name=…; or a folder of repos."
        ),
    ],
    instruction: Annotated[
        str | None,
        typer.Option(help="The change to make: text, or the name of a file holding it."),
    ] = None,
    instruction_file: Annotated[
        Path | None, typer.Option(help="A file holding the change to make.")
    ] = None,
    model: Annotated[
        str, typer.Option("--model", "-m", help='kimi-k3, a URL, or command:"a codemod".')
    ] = "kimi-k3",
    agent: AgentOption = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1)] = 4,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Job folder.")] = Path(
        "runs/refactor"
    ),
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Commit each changed-green patch to a branch agentenv/<job>."),
    ] = False,
    max_turns: Annotated[int, typer.Option(min=1)] = 50,
    test_timeout: Annotated[
        float, typer.Option(min=1, help="Seconds one run of a repo's tests may take.")
    ] = 900,
    command_timeout: Annotated[
        float,
        typer.Option(min=1, max=3600, help="Seconds a command: codemod may take per repo."),
    ] = 1800,
    max_cost: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Dollars the job may spend (earlier runs included): no repo starts once "
            "spent; run again with a higher cap to go on.",
        ),
    ] = None,
    retry_errors: Annotated[
        bool,
        typer.Option(
            "--retry-errors",
            help="Run again the repos whose last result is an error; the others are kept.",
        ),
    ] = False,
    redo_changed: Annotated[
        bool,
        typer.Option(
            "--redo-changed",
            help="When repos' settings changed since the job started (a test= fixed, say) "
            "and nothing else did: drop their results and run them again.",
        ),
    ] = False,
) -> None:
    """One instruction, many repos: a verified patch per repo, a report, and optionally a
    branch per repo. Re-running on the same --out resumes (and takes on repos added to the
    list)."""
    from agentenv.agent.loop import Limits
    from agentenv.refactor.job import run_refactor, totals_line
    from agentenv.runner.budget import Budget

    text = _instruction_text(instruction, instruction_file)
    check_agent_or_exit(agent, backend=backend_of(ctx), model=model)  # before anything runs
    job_name = out_dir.resolve().name
    limits = Limits(max_turns=max_turns)
    branch = f"agentenv/{job_name}" if apply else None
    entries, redone = _start(
        repos, text, model, limits, out_dir, redo_changed=redo_changed, branch=branch, agent=agent
    )
    log.configure("info", json_file=str(out_dir / "log.jsonl"))
    _say_redone(redone, "repos")
    budget = Budget(max_cost)
    job = functools.partial(
        run_refactor,
        entries,
        text,
        model,
        out=out_dir,
        concurrency=concurrency,
        limits=limits,
        on_done=_show,
        test_timeout_s=test_timeout,
        command_timeout_s=command_timeout,
        budget=budget,
        retry_errors=retry_errors,
        backend=backend_of(ctx),
        agent=agent,
    )
    results = _run_to_end(job, out_dir)
    out.print(totals_line(results), highlight=False)
    failed_apply = apply and not _apply(entries, out_dir, job_name, text)
    out.print(
        f"report: {out_dir}/summary.md (and summary.json), patches in {out_dir}/patches/",
        highlight=False,
    )
    out.print(f"to read it: agentenv view {out_dir}", highlight=False, soft_wrap=True)
    errors = sum(r.outcome == "error" for r in results)
    if errors:
        _say_errors(errors, "repo", f"why: {out_dir}/summary.md")
    if budget.stopped:
        err.print(
            f"[bold yellow]stopped:[/] the job has spent ${budget.spent_usd:.4f} of its "
            f"--max-cost ${max_cost}; {budget.refused} repos not started. Run the same "
            "command with a higher --max-cost to go on.",
            highlight=False,
        )
        raise typer.Exit(ExitCode.BUDGET)
    if failed_apply:
        raise typer.Exit(ExitCode.FAILED)
    if errors:
        raise typer.Exit(ExitCode.ERRORS)


def _start(
    repos: Path,
    text: str,
    model: str,
    limits: Limits,
    out_dir: Path,
    *,
    redo_changed: bool,
    branch: str | None,
    agent: str | None = None,
) -> tuple[list[RepoEntry], list[str]]:
    """The repos of the job, checked before anything is written (bad input exits 2): the
    ``branch`` ``--apply`` commits to, the repo list, a missing key, a folder that is not
    this job. With them, the repos ``--redo-changed`` runs again."""
    from agentenv.errors import ConfigMismatch
    from agentenv.refactor.job import refactor_config
    from agentenv.refactor.repos import RepoError, load_repo_list, ref_format_problem
    from agentenv.runner import Policies
    from agentenv.runner.journal import check_config

    if branch is not None and (problem := ref_format_problem(branch)) is not None:
        raise _fail(f"--apply: {problem}, made from the --out folder's name; choose another --out")
    try:
        entries = load_repo_list(repos)
        Policies(model)  # a missing key, before any output
        # a folder that is not this job is refused before anything is written to it (a log)
        config = refactor_config(entries, text, model, limits, agent=agent)
        redone = check_config(out_dir, config, redo_changed=redo_changed)
    except (RepoError, ConfigMismatch) as e:
        raise _fail(str(e)) from e
    except (KeyError, ValueError) as e:
        raise _fail(str(e).strip("'\"")) from e
    return entries, redone


def _show(r: RepoResult) -> None:
    """Print a repo's outcome as it ends, coloured, with why (or its notes)."""
    colour = {"changed-green": "green", "error": "red", "changed-red": "red"}.get(
        r.outcome, "yellow"
    )
    detail = " | ".join((r.why or "; ".join(r.notes)).split("\n"))
    # names and command output are text, never markup ("[stderr]" must show)
    name, shown = escape(r.repo), escape(detail[:200])
    out.print(f"[{colour}]{r.outcome:14}[/] {name}  [dim]{shown}[/]", highlight=False)


def _run_to_end(job: Callable[[], Awaitable[list[RepoResult]]], out_dir: Path) -> list[RepoResult]:
    """Run the job to its end; an interrupt, a stop or bad input exits with its code."""
    from agentenv.errors import ConfigMismatch

    try:
        return anyio.run(job)
    except KeyboardInterrupt:
        err.print(f"interrupted: finished repos are in {out_dir}/report.jsonl; run again to resume")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except JobStopped as e:
        err.print(
            f"[bold red]stopped:[/] {escape(str(e))}. Run the same command again "
            + ("to resume." if e.resumable else "once that is fixed."),
            highlight=False,
        )
        raise typer.Exit(ExitCode.STOPPED if e.resumable else ExitCode.FAILED) from None
    except (ConfigMismatch, KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e


def _apply(entries: list[RepoEntry], out_dir: Path, job_name: str, text: str) -> bool:
    """``--apply``: commit each changed-green patch to its branch and say what became of
    each; whether every one was applied."""
    from agentenv.refactor.job import apply_patches
    from agentenv.refactor.repos import RepoError

    try:
        applied = apply_patches(entries, out_dir, job_name, text)
    except RepoError as e:
        raise _fail(str(e)) from e
    every = True
    for a in applied:
        if a.made is None:
            every = False
            err.print(f"not applied: {a.repo}: {a.error}", highlight=False)
            continue
        what = {"created": "→ branch", "unchanged": "already on branch", "renamed": "→ branch"}
        note = f"  ({a.made.note})" if a.made.note else ""
        out.print(f"applied: {a.repo} {what[a.made.status]} {a.made.branch}{note}", highlight=False)
    return every
