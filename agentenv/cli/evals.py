"""Eval jobs: ``eval`` and ``report``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.markup import escape

from agentenv import log
from agentenv.cli._app import (
    EXIT_CODES,
    ExitCode,
    _fail,
    _say_errors,
    _say_redone,
    _warn,
    app,
    err,
    out,
    print_wide,
)
from agentenv.errors import NoRoute
from agentenv.eval.summary import Row
from agentenv.sandbox import SandboxError

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
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Task folders, folders of them, or SWE-bench instance files (.jsonl)."),
    ] = None,
    model: ModelOption = "kimi-k3",
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
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from agentenv.cli.render import ProgressLines, phase_line, summary_table
    from agentenv.errors import ConfigMismatch, JobStopped, TaskError
    from agentenv.eval.jobs import EpisodeSettings, job_config, regrade, run_eval, settled
    from agentenv.eval.jobs import Progress as JobProgress
    from agentenv.runner import Policies
    from agentenv.runner.results import check_config, load_results
    from agentenv.tasks import load_tasks, task_warnings

    if regrade_dir is not None:
        try:
            rows = anyio.run(regrade, regrade_dir)
        except (OSError, TaskError, SandboxError) as e:
            raise _fail(str(e)) from e
        print_wide(summary_table(rows, f"{regrade_dir} (regraded)"))
        return
    if not paths:
        raise _fail("give task folders (or a folder of them, such as environments/)")
    folder = out_dir or Path("runs") / "".join(
        c if c.isalnum() or c in "-_." else "_" for c in model
    )
    try:
        tasks = load_tasks(paths)
    except TaskError as e:
        raise _fail(str(e)) from e
    _warn([w for t in tasks for w in task_warnings(t)])
    if executor not in ("local", "ray"):
        raise _fail(f"--executor must be local or ray, not {executor!r}")
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as e:
            raise _fail("--executor ray needs Ray: pip install 'agentenv[ray]'") from e
    missing = [t.id for t in tasks if t.verifier is None]
    if missing:
        raise _fail(f"these tasks have no [verifier] in task.toml: {', '.join(missing)}")
    # how every episode runs: made once here, handed to run_eval, and by it to the executor
    settings = EpisodeSettings(
        model=model,
        attempts=attempts,
        keep_final=keep_final,
        reasoning_effort=reasoning_effort,
        engine_wait_s=engine_wait,
    )
    try:
        Policies(model, reasoning_effort=reasoning_effort)  # a missing key, before any output
        # a folder holding another job is refused before anything is printed or written
        config = job_config(tasks, settings, samples=samples)  # --redo-changed: redone here
        redone = check_config(folder, config, redo_changed=redo_changed)
    except (KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    except ConfigMismatch as e:
        raise _fail(str(e)) from e
    log.configure("info", json_file=str(folder / "log.jsonl"))  # the console has the bar
    _say_redone(redone, "tasks")
    total = len(tasks) * samples
    lines = None if err.is_terminal else ProgressLines(err, every_s=progress_every)
    bar = Progress(
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
        disable=lines is not None,
    )
    bar_id = bar.add_task(
        "eval", total=total, passed=0, running=0, errors=0, failing="", cost=0.0, spent=""
    )
    said_collected = said_endpoints = False

    def show(p: JobProgress) -> None:
        nonlocal said_collected, said_endpoints
        if p.endpoint_notes and not said_endpoints:
            said_endpoints = True
            _warn([f"the model endpoint {note}" for note in p.endpoint_notes])
        if p.collected and not said_collected:
            said_collected = True
            err.print(
                f"removed {p.collected} containers/images left by a killed run of this job",
                highlight=False,
            )
        if lines is not None:
            lines.update(p)
        bar.update(
            bar_id,
            completed=p.done,
            passed=p.passed,
            running=p.running,
            errors=p.errors,
            failing=f" ({p.failed_requests} model requests failed)" if p.failed_requests else "",
            cost=p.cost_usd,
            spent=" · budget spent" if p.budget_spent else "",
        )

    async def run() -> list[Row]:
        cluster = None
        if executor == "ray":
            from agentenv.rl import ray_executor  # agentenv[ray], checked above

            cluster = ray_executor.runner(address=address, out=folder)
        return await run_eval(
            tasks,
            settings,
            out=folder,
            samples=samples,
            concurrency=concurrency,
            on_progress=show,
            executor=cluster,
            max_cost_usd=max_cost,
            retry_errors=retry_errors,
        )

    async def job() -> list[Row]:
        if lines is None:
            return await run()
        rows: list[Row] = []
        error: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def ticker() -> None:
                while True:
                    await anyio.sleep(1.0)
                    lines.tick()

            tg.start_soon(ticker)
            try:
                rows = await run()
            except Exception as e:  # out as it is, not wrapped in a group
                error = e
            finally:
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        return rows

    lines_before = load_results(folder) if (folder / "results.jsonl").exists() else {}
    done_before = len(settled(folder, retry_errors=retry_errors)) if lines_before else 0
    if lines_before:
        again = len(lines_before) - done_before
        what = "errors" if retry_errors else "infrastructure errors"
        retried = f", {again} {what} to run again" if again else ""
        err.print(
            f"resuming {folder}: {done_before} episodes already done{retried}", highlight=False
        )
    try:
        with bar:
            rows = anyio.run(job)
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
    if lines is not None:
        lines.print()  # the last state, whatever the step
    many = ("s" if len(tasks) != 1 else "", "s" if samples != 1 else "")
    title = f"{len(tasks)} task{many[0]} × {samples} sample{many[1]} with {model}"
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
    if rows[-1].stopped == "max_cost":
        left = total - rows[-1].episodes
        err.print(
            f"[bold yellow]stopped:[/] the job has spent ${rows[-1].cost_usd:.4f} of its "
            f"--max-cost ${max_cost}; {left} episodes not started. Run the same command "
            "with a higher --max-cost to go on.",
            highlight=False,
        )
        raise typer.Exit(ExitCode.BUDGET)
    if errors:
        raise typer.Exit(ExitCode.ERRORS)


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
    if failures:
        failed = sum(not r.passed for r in results)
        if failed:
            print_wide(failures_table(results, f"{title}, {failed} not passed"))
        else:
            out.print(f"{title}: every one passed", highlight=False, soft_wrap=True)
        return
    rows = write_summary(folder, results, config.samples, config.tags, stopped=_stopped(folder))
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
