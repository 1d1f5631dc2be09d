"""Eval jobs: ``eval`` and ``report``."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
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
    _warn,
    app,
    backend_of,
    check_agent_or_exit,
    err,
    out,
    print_wide,
)
from agentenv.errors import NoRoute
from agentenv.eval.summary import Row
from agentenv.sandbox import SandboxError

if TYPE_CHECKING:
    from agentenv.eval.jobs import EpisodeSettings
    from agentenv.eval.jobs import Progress as JobProgress
    from agentenv.formats import RefusedTask as Refused
    from agentenv.tasks import Task

ModelOption = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="kimi-k3, an OpenAI-compatible URL (comma-separate to route with "
        "fallback), oracle, or null.",
    ),
]


@app.command("eval", epilog=EXIT_CODES)
def eval_(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Task folders, folders of them, or SWE-bench instance files (.jsonl)."),
    ] = None,
    model: ModelOption = "kimi-k3",
    agent: AgentOption = None,
    samples: Annotated[int, typer.Option("--samples", "-k", min=1, help="Episodes per task.")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1)] = 4,
    out_dir: Annotated[
        Path | None, typer.Option("--out", "-o", help="Job folder; default runs/<model>.")
    ] = None,
    attempts: Annotated[
        int, typer.Option(min=1, help="Tries per episode on infrastructure failures.")
    ] = 3,
    keep_final: Annotated[
        bool,
        typer.Option(
            "--keep-final", help="Keep each final workdir in the job folder (for --regrade)."
        ),
    ] = False,
    regrade_dir: Annotated[
        Path | None,
        typer.Option("--regrade", help="Re-run the verifiers on a job's kept final states."),
    ] = None,
    reasoning_effort: Annotated[str | None, typer.Option(help="K3 takes only 'max'.")] = None,
    executor: Annotated[
        str,
        typer.Option(help="local, or ray (episodes as Ray tasks; pip install 'agentenv\\[ray]')."),
    ] = "local",
    address: Annotated[
        str | None, typer.Option(help="With --executor ray: the cluster, e.g. 10.0.0.5:6379.")
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            min=0.0,
            help="Dollars the job may spend, earlier runs included: no episode starts once "
            "spent (running ones finish; exit code 3). Run again with a higher cap to go on.",
        ),
    ] = None,
    engine_wait: Annotated[
        float,
        typer.Option(
            "--engine-wait",
            min=0.0,
            help="Seconds an episode waits for a sandbox engine that stopped answering "
            "(restarting, say) before the job stops (exit code 4; run again to resume).",
        ),
    ] = 120.0,
    progress_every: Annotated[
        float,
        typer.Option(
            min=1.0, help="Without a terminal: print a progress line at least this often (s)."
        ),
    ] = 30.0,
    retry_errors: Annotated[
        bool,
        typer.Option(
            "--retry-errors",
            help="Run again every episode whose last result is an error, whatever it was (a "
            "task or verifier error too, once fixed); the graded ones are kept.",
        ),
    ] = False,
    redo_changed: Annotated[
        bool,
        typer.Option(
            "--redo-changed",
            help="When tasks changed since the job started (fixed after a failed run) and "
            "nothing else did: drop their results and run them again, keeping the others.",
        ),
    ] = False,
) -> None:
    """Run tasks × samples, verify each episode, and report pass@k, reward, tokens, cache hits,
    dollars (and dollars per solved episode) and time by phase. Re-running on the same --out
    resumes, after removing what a killed run of the job left running."""
    from agentenv.eval.jobs import EpisodeSettings

    backend = backend_of(ctx)
    if regrade_dir is not None:
        _regrade(regrade_dir, backend)
        return
    tasks, refused = _checked_tasks(paths, executor)
    check_agent_or_exit(agent, backend=backend, model=model)  # before any episode
    # how every episode runs: made once here, handed to run_eval, and by it to the executor
    # (a Ray worker too: the backend travels in it, not in this process's environment)
    settings = EpisodeSettings(
        model=model,
        attempts=attempts,
        keep_final=keep_final,
        reasoning_effort=reasoning_effort,
        backend=backend,
        engine_wait_s=engine_wait,
        agent=agent,
    )
    job = _EvalJob(
        tasks=tasks,
        refused=refused,
        settings=settings,
        folder=out_dir or _default_folder(model),
        samples=samples,
        concurrency=concurrency,
        executor=executor,
        address=address,
        max_cost=max_cost,
        retry_errors=retry_errors,
    )
    redone = _start(job, redo_changed=redo_changed)
    log.configure("info", json_file=str(job.folder / "log.jsonl"))  # the console has the bar
    _say_redone(redone, "tasks")
    rows = _run_to_end(job, _Display(job.total, progress_every))
    _say_outcome(job, rows)


def _regrade(folder: Path, backend: str) -> None:
    """``--regrade``: verify a job's kept final states again and print its summary."""
    from agentenv.cli.render import summary_table
    from agentenv.errors import TaskError
    from agentenv.eval.jobs import regrade

    try:
        rows = anyio.run(functools.partial(regrade, folder, backend=backend))
    except (OSError, TaskError, SandboxError) as e:
        raise _fail(str(e)) from e
    print_wide(summary_table(rows, f"{folder} (regraded)"))


def _default_folder(model: str) -> Path:
    """The job folder without ``--out``: runs/<model>, the model's name made a file name."""
    return Path("runs") / "".join(c if c.isalnum() or c in "-_." else "_" for c in model)


def _checked_tasks(paths: list[Path] | None, executor: str) -> tuple[list[Task], list[Refused]]:
    """The tasks to run (their warnings printed) and the task folders refused (each named
    with its reason: the job records them and runs the others); bad input exits 2: no path,
    a path with no task, every task refused, an executor that is not there."""
    from agentenv.errors import TaskError
    from agentenv.formats import RefusedTask, load_runnable
    from agentenv.problems import Problem
    from agentenv.tasks import task_digest, task_warnings

    if not paths:
        raise _fail("give task folders (or a folder of them, such as environments/)")
    try:
        tasks, refused = load_runnable(paths)
    except TaskError as e:
        raise _fail(str(e)) from e
    # a task without a verifier could only be scored by nobody: refused like one that
    # does not load, not run
    for task in [t for t in tasks if t.verifier is None]:
        problem = Problem(task.folder, "no [verifier] in task.toml: nothing could grade it")
        refused.append(RefusedTask(task.id, task.folder or Path(task.id), (problem,),
                                   task_digest(task)))  # fmt: skip
    tasks = [t for t in tasks if t.verifier is not None]
    if not tasks:
        reasons = "\n".join(f"{r.id}: {r.reason}" for r in refused)
        raise _fail(f"every task was refused, nothing to run:\n{reasons}")
    for r in refused:
        err.print(
            f"[bold yellow]refused:[/] {escape(r.id)} (recorded, not run): {escape(r.reason)}",
            highlight=False,
            soft_wrap=True,
        )
    _warn([w for t in tasks for w in task_warnings(t)])
    if executor not in ("local", "ray"):
        raise _fail(f"--executor must be local or ray, not {executor!r}")
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as e:
            raise _fail("--executor ray needs Ray: pip install 'agentenv[ray]'") from e
    return tasks, refused


@dataclass(frozen=True)
class _EvalJob:
    """One eval job as its options ask for it, checked."""

    tasks: list[Task]
    refused: list[Refused]  # task folders that did not load: recorded, never run
    settings: EpisodeSettings
    folder: Path
    samples: int
    concurrency: int
    executor: str
    address: str | None
    max_cost: float | None
    retry_errors: bool

    @property
    def total(self) -> int:
        """Episodes in the job: tasks × samples (a refused task's lines counted)."""
        return (len(self.tasks) + len(self.refused)) * self.samples

    async def run(self, show: Callable[[JobProgress], None]) -> list[Row]:
        """Run the job on its executor (``run_eval``), showing progress with ``show``."""
        from agentenv.eval.jobs import run_eval

        cluster = None
        if self.executor == "ray":
            from agentenv.eval import ray_executor  # agentenv[ray], checked with the tasks

            cluster = ray_executor.runner(address=self.address, out=self.folder)
        return await run_eval(
            self.tasks,
            self.settings,
            out=self.folder,
            samples=self.samples,
            concurrency=self.concurrency,
            on_progress=show,
            executor=cluster,
            max_cost_usd=self.max_cost,
            retry_errors=self.retry_errors,
            refused=self.refused,
        )


def _start(job: _EvalJob, *, redo_changed: bool) -> list[str]:
    """Check the job before anything is printed or written (a missing key, a folder that
    holds another job: exit 2); the tasks ``--redo-changed`` runs again."""
    from agentenv.errors import ConfigMismatch, TaskError
    from agentenv.eval.jobs import job_config
    from agentenv.runner import Policies
    from agentenv.runner.harness import refuse_task, resolve_agent
    from agentenv.runner.results import check_config

    model, effort = job.settings.model, job.settings.reasoning_effort
    try:
        harness = resolve_agent(job.settings.agent)
        if harness is not None:
            for task in job.tasks:  # a multi-step task, by name, before anything runs
                refuse_task(task, harness)
    except TaskError as e:
        raise _fail(str(e)) from e
    try:
        Policies(model, reasoning_effort=effort)  # a missing key, before any output
        # a folder holding another job is refused before anything is printed or written
        config = job_config(job.tasks, job.settings, samples=job.samples, refused=job.refused)
        return check_config(job.folder, config, redo_changed=redo_changed)  # redone here
    except (KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    except ConfigMismatch as e:
        raise _fail(str(e)) from e


class _Display:
    """The job's progress on the console: a bar on a terminal, else a plain line now and
    then; and, once each, the endpoint's notes and the leftovers of a killed run removed."""

    def __init__(self, total: int, progress_every: float) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from agentenv.cli.render import ProgressLines

        self.lines = None if err.is_terminal else ProgressLines(err, every_s=progress_every)
        self.bar = Progress(
            TextColumn("[bold]eval[/]"),
            BarColumn(),
            TextColumn(
                "{task.completed}/{task.total} done · {task.fields[passed]} passed · "
                "{task.fields[running]} running · {task.fields[errors]} errors"
                "{task.fields[failing]} · ${task.fields[cost]:.4f}{task.fields[spent]}"
            ),
            TimeElapsedColumn(),
            console=err,
            transient=False,
            disable=self.lines is not None,
        )
        self.bar_id = self.bar.add_task(
            "eval", total=total, passed=0, running=0, errors=0, failing="", cost=0.0, spent=""
        )
        self.said_collected = self.said_endpoints = False

    def show(self, p: JobProgress) -> None:
        """Show the job's progress as it is now."""
        if p.endpoint_notes and not self.said_endpoints:
            self.said_endpoints = True
            _warn([f"the model endpoint {note}" for note in p.endpoint_notes])
        if p.collected and not self.said_collected:
            self.said_collected = True
            err.print(
                f"removed {p.collected} containers/images left by a killed run of this job",
                highlight=False,
            )
        if self.lines is not None:
            self.lines.update(p)
        self.bar.update(
            self.bar_id,
            completed=p.done,
            passed=p.passed,
            running=p.running,
            errors=p.errors,
            failing=f" ({p.failed_requests} model requests failed)" if p.failed_requests else "",
            cost=p.cost_usd,
            spent=" · budget spent" if p.budget_spent else "",
        )

    async def run(self, job: _EvalJob) -> list[Row]:
        """Run ``job``, showing its progress; without a terminal, a ticker prints the
        progress line on time even while no episode ends."""
        lines = self.lines
        if lines is None:
            return await job.run(self.show)
        rows: list[Row] = []
        error: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def ticker() -> None:
                while True:
                    await anyio.sleep(1.0)
                    lines.tick()

            tg.start_soon(ticker)
            try:
                rows = await job.run(self.show)
            except Exception as e:  # out as it is, not wrapped in a group
                error = e
            finally:
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        return rows


def _say_resuming(folder: Path, retry_errors: bool) -> None:
    """Say that the job resumes in ``folder``, if it does: how many episodes are done and
    how many will run again."""
    from agentenv.eval.jobs import settled
    from agentenv.runner.results import load_results

    lines_before = load_results(folder) if (folder / "results.jsonl").exists() else {}
    done_before = len(settled(folder, retry_errors=retry_errors)) if lines_before else 0
    if lines_before:
        again = len(lines_before) - done_before
        what = "errors" if retry_errors else "infrastructure errors"
        retried = f", {again} {what} to run again" if again else ""
        err.print(
            f"resuming {folder}: {done_before} episodes already done{retried}", highlight=False
        )


def _run_to_end(job: _EvalJob, display: _Display) -> list[Row]:
    """Run the job to its end; an interrupt, a stop or a failure exits with its code."""
    from agentenv.errors import ConfigMismatch, JobStopped

    folder = job.folder
    _say_resuming(folder, job.retry_errors)
    try:
        with display.bar:
            rows = anyio.run(display.run, job)
    except KeyboardInterrupt:
        err.print(
            f"interrupted: finished episodes are in {folder}/results.jsonl; "
            "run the same command again to resume"
        )
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except JobStopped as e:
        kept = (
            f"Finished episodes are in {folder}/results.jsonl"
            if (folder / "results.jsonl").exists()
            else "No episode finished"
        )
        err.print(
            f"[bold red]stopped:[/] {escape(str(e))}. {escape(kept)}; "
            + ("run the same command again to resume." if e.resumable
               else "fix that, then run the same command again to go on."),
            highlight=False,
        )  # fmt: skip
        raise typer.Exit(ExitCode.STOPPED if e.resumable else ExitCode.FAILED) from None
    except (ConfigMismatch, KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    except SandboxError as e:
        raise _fail(str(e), ExitCode.FAILED) from e
    if display.lines is not None:
        display.lines.print()  # the last state, whatever the step
    return rows


def _say_outcome(job: _EvalJob, rows: list[Row]) -> None:
    """Print the job's summary, where its results are and what to do next; exit 3 when
    ``--max-cost`` stopped it, 5 when some episodes ended in an error."""
    from agentenv.cli.render import phase_line, summary_table

    folder, samples, model = job.folder, job.samples, job.settings.model
    count = len(job.tasks) + len(job.refused)
    many = ("s" if count != 1 else "", "s" if samples != 1 else "")
    title = f"{count} task{many[0]} × {samples} sample{many[1]} with {model}"
    if job.settings.agent is not None:
        title += f" played by {job.settings.agent}"
    if job.refused:
        title += f" ({len(job.refused)} refused)"
    print_wide(summary_table(rows, title))
    out.print(phase_line(rows[-1]), highlight=False, soft_wrap=True)
    out.print(
        f"results in {folder}/ (results.jsonl, trajectories/, summary.json, log.jsonl)",
        highlight=False,
    )
    out.print(f"to read it: agentenv view {folder}", highlight=False, soft_wrap=True)
    errors = rows[-1].errors
    if errors:
        _say_errors(errors, "episode", f"not a grade; why: agentenv report {folder} --failures")
    _say_refused(job.refused)
    if rows[-1].stopped == "max_cost":
        left = job.total - rows[-1].episodes
        err.print(
            f"[bold yellow]stopped:[/] the job has spent ${rows[-1].cost_usd:.4f} of its "
            f"--max-cost ${job.max_cost}; {left} episodes not started. Run the same command "
            "with a higher --max-cost to go on.",
            highlight=False,
        )
        raise typer.Exit(ExitCode.BUDGET)
    if errors or job.refused:
        raise typer.Exit(ExitCode.ERRORS)


def _say_refused(refused: list[Refused]) -> None:
    """Name the tasks refused at load once more, after the summary: they ran nothing and are
    not in pass@k; the exit is then 5, as for errors (the job did not grade every task)."""
    if not refused:
        return
    many = len(refused) != 1
    err.print(
        f"[bold yellow]refused:[/] {len(refused)} task{'s' if many else ''} did not load and "
        "ran nothing (not in pass@k; outcome 'refused' in results.jsonl): "
        + "; ".join(f"{escape(r.id)}: {escape(r.problems[0].message)}" for r in refused),
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def report(
    folder: Annotated[Path, typer.Argument(help="A job folder (agentenv eval or refactor --out).")],
    totals: Annotated[
        bool, typer.Option("--totals", help="Only the per-tag subtotals and the total.")
    ] = False,
    failures: Annotated[
        bool,
        typer.Option("--failures", help="Only the episodes that failed or errored, and why."),
    ] = False,
) -> None:
    """Print a job's summary again, from its results.jsonl."""
    from pydantic import ValidationError

    from agentenv.cli.render import failures_table, phase_line, summary_table
    from agentenv.eval.jobs import load_config, write_summary
    from agentenv.runner.results import load_results

    if _kind(folder) == "refactor":  # its report is the summary it wrote
        try:
            out.print(
                (folder / "summary.md").read_text(), highlight=False, markup=False, soft_wrap=True
            )
        except OSError as e:
            raise _fail(f"{folder} is a refactor job with no summary.md yet ({e})") from e
        return
    try:
        config = load_config(folder)
    except ValidationError as e:
        raise _fail(f"{folder}/config.json is not an eval job's: {e.errors()[0]['msg']}") from e
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from e
    results = list(load_results(folder).values())
    expected = len(config.tasks) * config.samples
    title = f"{folder}: {len(results)}/{expected} episodes with {config.model}"
    if config.agent is not None:
        title += f" played by {config.agent}"
    if failures:
        failed = sum(not r.passed for r in results)
        if failed:
            print_wide(failures_table(results, f"{title}, {failed} not passed"))
        else:
            out.print(f"{title}: every one passed", highlight=False, soft_wrap=True)
        return
    rows = write_summary(
        folder, results, config.samples, config.tags, stopped=_stopped(folder), agent=config.agent
    )
    if totals:
        rows = [r for r in rows if r.kind != "task"]
    print_wide(summary_table(rows, title))
    out.print(phase_line(rows[-1]), highlight=False, soft_wrap=True)


def _kind(folder: Path) -> str | None:
    """The ``kind`` a job folder's config.json names, if it can be read."""
    try:
        value = json.loads((folder / "config.json").read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _stopped(folder: Path) -> str | None:
    """Why the job's last run stopped early, as its summary.json says (report rewrites it)."""
    try:
        rows = json.loads((folder / "summary.json").read_text())
        value = rows[-1].get("stopped") if rows and isinstance(rows[-1], dict) else None
    except (OSError, ValueError):
        return None
    return value if isinstance(value, str) else None
