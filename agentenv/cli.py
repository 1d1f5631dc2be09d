"""``agentenv``: the command line. Thin: every command calls the library and prints."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentenv import log
from agentenv.agent.loop import Trajectory
from agentenv.archive import collect_leftovers
from agentenv.errors import ModelError, NoRoute
from agentenv.runner.summary import Row
from agentenv.sandbox import SandboxError, SandboxSpec, connect
from agentenv.sandbox import gc as gc_mod
from agentenv.sandbox.images import BASE_IMAGE, base_image_state, build_base

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Run AI agents in Docker sandboxes that pause while the model thinks.",
)
images_app = typer.Typer(no_args_is_help=True, help="Images without a registry.")
sandbox_app = typer.Typer(no_args_is_help=True, help="Sandboxes on this engine.")
app.add_typer(images_app, name="images")
app.add_typer(sandbox_app, name="sandbox")
out = Console()
err = Console(stderr=True)

ENGINE_SCRIPT = Path(__file__).parent / "sandbox" / "engine.sh"


@app.callback()
def _setup(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False,
) -> None:
    log.configure("info" if verbose else "warning")


def _warn(messages: list[str]) -> None:
    """Print each message as a warning (text, never markup)."""
    for message in messages:
        err.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False)


def _fail(message: str) -> typer.Exit:
    # the message quotes paths, names and output: text, never markup ("[tool.pytest]")
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(1)


@app.command()
def demo(
    image: Annotated[str, typer.Option(help="Image to start.")] = BASE_IMAGE,
    rounds: Annotated[int, typer.Option(min=1, help="Commands and pause/resume cycles.")] = 20,
) -> None:
    """Create a sandbox, run a command, pause and resume it; print the timings."""
    from agentenv.demo import run_demo

    try:
        report = anyio.run(run_demo, SandboxSpec(image=image), rounds)
    except SandboxError as e:
        raise _fail(str(e)) from e
    out.print(f"[bold]{escape(report.output)}[/]")
    table = Table("step", "time", title=f"one sandbox ({report.exec_mode} exec path)")
    table.add_row("create → ready", f"{report.create_ms:.0f} ms")
    table.add_row("first command", f"{report.first_exec_ms:.1f} ms")
    table.add_row(f"exec `true` (p50 of {report.rounds})", f"{report.exec_p50_ms:.2f} ms")
    table.add_row(f"pause (p50 of {report.rounds})", f"{report.pause_p50_ms:.1f} ms")
    table.add_row(f"resume (p50 of {report.rounds})", f"{report.resume_p50_ms:.1f} ms")
    table.add_row("CPU of a busy loop while paused 0.5 s", f"{report.paused_cpu_ns / 1e6:.1f} ms")
    out.print(table)


@app.command()
def doctor(
    fix: Annotated[bool, typer.Option("--fix", help="Install/start what is missing.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only problems.")] = False,
) -> None:
    """Check the Docker engine and the base image.

    With --fix: install Debian's docker.io (as root), start dockerd and build the base
    image, each only where needed."""
    if fix:
        done = subprocess.run(["bash", str(ENGINE_SCRIPT)], check=False)
        if done.returncode != 0:
            raise _fail("could not get a Docker engine running (see above)")
    try:
        engine = connect()
    except SandboxError as e:
        raise _fail(str(e)) from e
    version = engine.client.version()
    if not quiet:
        out.print(
            f"engine: Docker {version.get('Version')} (API {engine.api_version}), "
            f"{version.get('Os')}/{version.get('Arch')}, kernel {version.get('KernelVersion')}"
        )
    base_ok, state = base_image_state(engine)
    if not base_ok and fix:
        if shutil.which("debootstrap") is None:
            subprocess.run(["bash", str(ENGINE_SCRIPT), "debootstrap"], check=False)
        err.print(
            f"agentenv setup: building {BASE_IMAGE} from Debian packages (a minute or two)",
            soft_wrap=True,
        )
        try:
            build_base(engine)
        except SandboxError as e:
            raise _fail(str(e)) from e
        base_ok, state = True, "built"
    if not quiet or not base_ok:
        out.print(f"base image {BASE_IMAGE}: {state}")
    if not base_ok:
        out.print("  fix: agentenv images build-base")
        raise typer.Exit(1)


@images_app.command("build-base")
def images_build_base(
    tag: Annotated[str, typer.Option(help="Name of the image to build.")] = BASE_IMAGE,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if up to date.")] = False,
    mirror: Annotated[
        str | None, typer.Option(help="Debian mirror; default: this machine's apt source.")
    ] = None,
) -> None:
    """Build the base image from Debian packages (debootstrap + docker import); no registry."""
    log.configure("info")
    try:
        image_id = build_base(connect(), tag=tag, mirror=mirror, force=force)
    except SandboxError as e:
        raise _fail(str(e)) from e
    out.print(f"{tag} {image_id[7:19]}")


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _print_rows(rows: list[gc_mod.Leftover], title: str) -> None:
    now = dt.datetime.now().timestamp()
    table = Table(
        "kind", "id", "name", "status", "run", "owner", "age", "expires in", "stale", title=title
    )
    for r in rows:
        table.add_row(
            r.kind,
            r.id.removeprefix("sha256:")[:12],
            r.name,
            r.status,
            r.run,
            r.owner,
            _age(now - r.created),
            _age(r.expires - now) if r.expires > now else "expired",
            r.stale or "",
        )
    out.print(table)


JsonFlag = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]


def _print_json(rows: list[gc_mod.Leftover]) -> None:
    for row in rows:
        print(row.model_dump_json())


@sandbox_app.command("ls")
def sandbox_ls(as_json: JsonFlag = False) -> None:
    """List our sandboxes and snapshot images, and which ones gc would remove."""
    try:
        rows = gc_mod.list_ours(connect())
    except SandboxError as e:
        raise _fail(str(e)) from e
    if as_json:
        _print_json(rows)
    else:
        _print_rows(rows, f"{len(rows)} agentenv objects")


@app.command()
def gc(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would go.")] = False,
    everything: Annotated[
        bool, typer.Option("--all", help="Remove all of ours, even those in use.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Remove sandboxes and snapshots whose owner is gone or whose TTL passed, and the
    temporary workspace archives of runners killed on this host.

    Never touches anything without agentenv's labels."""
    try:
        rows = gc_mod.collect(connect(), everything=everything, dry_run=dry_run)
    except SandboxError as e:
        raise _fail(str(e)) from e
    files = collect_leftovers(dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    if as_json:
        _print_json(rows)
    elif rows:
        _print_rows(rows, f"{verb} {len(rows)}")
    elif not files:
        out.print(f"{verb} nothing")
    if files and not as_json:
        out.print(
            f"{verb} {len(files)} leftover workspace archive(s) in {files[0].parent}",
            markup=False,
        )


@app.command()
def run(
    task: Annotated[
        Path | None, typer.Argument(help="A task folder (task.toml, instruction.md, workspace/).")
    ] = None,
    model: Annotated[
        str, typer.Option("--model", "-m", help="kimi-k3, an OpenAI-compatible URL, oracle, null.")
    ] = "kimi-k3",
    image: Annotated[str | None, typer.Option(help="Without a task folder: the image.")] = None,
    instruction: Annotated[
        str | None, typer.Option(help="Without a task folder: what the agent is asked to do.")
    ] = None,
    max_turns: Annotated[int | None, typer.Option(min=1, help="Override the task's.")] = None,
    reasoning_effort: Annotated[str | None, typer.Option(help="K3 takes only 'max'.")] = None,
    no_pause: Annotated[
        bool, typer.Option("--no-pause", help="Keep the sandbox running while the model thinks.")
    ] = False,
    save: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the trajectory (JSON) here.")
    ] = None,
) -> None:
    """Run one episode and show it live: reasoning (dimmed), tool calls and their results,
    then turns, tokens, cache hits and dollars."""
    from agentenv.errors import TaskError
    from agentenv.render import EpisodeRenderer, summary_line
    from agentenv.runner import Policies, run_task
    from agentenv.tasks import Task, load_task, task_warnings

    try:
        if task is not None:
            if image or instruction:
                raise TaskError("give a task folder, or --image with --instruction, not both")
            the_task = load_task(task)
            _warn(task_warnings(the_task))
        elif instruction:
            the_task = Task(id="adhoc", instruction=instruction, image=image or BASE_IMAGE)
        else:
            raise TaskError("give a task folder, or --instruction (and optionally --image)")
        if max_turns is not None:
            the_task.limits.max_turns = max_turns
        source = Policies(model, reasoning_effort=reasoning_effort)
        policy = source.for_task(the_task)
    except (TaskError, KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    renderer = EpisodeRenderer(out)
    out.print(f"[bold]{escape(the_task.id)}[/] with {escape(model)}", highlight=False)

    async def episode() -> Trajectory:
        try:
            traj, _ = await run_task(
                the_task,
                policy,
                pause=not no_pause,
                on_event=renderer.on_event,
                on_tool_result=renderer.on_tool_result,
            )
            return traj
        finally:
            await source.aclose()

    try:
        traj = anyio.run(episode)
    except (SandboxError, ModelError) as e:
        raise _fail(f"{type(e).__name__}: {e}") from e
    if save is not None:
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(traj.model_dump_json(indent=1))
    out.print(f"[bold]{summary_line(traj)}[/]", highlight=False, soft_wrap=True)


def _print_wide(table: Table) -> None:
    # a table read in a log or a pipe should not be squeezed to 80 columns
    (out if out.is_terminal else Console(width=max(out.width, 140))).print(table)


ModelOption = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="kimi-k3, an OpenAI-compatible URL (comma-separate to route with "
        "fallback), oracle, or null.",
    ),
]


@app.command("eval")
def eval_(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Task folders, or folders of them.")
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
    progress_every: Annotated[
        float,
        typer.Option(
            min=1.0, help="Without a terminal: print a progress line at least this often (s)."
        ),
    ] = 30.0,
) -> None:
    """Run tasks × samples, verify each episode, and report pass@k, reward, tokens, cache hits,
    dollars (and dollars per solved episode) and time by phase. Re-running on the same --out
    resumes, after removing what a killed run of the job left running."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from agentenv.errors import ConfigMismatch, JobStopped, TaskError
    from agentenv.render import ProgressLines, phase_line, summary_table
    from agentenv.runner import Policies
    from agentenv.runner.eval import Progress as JobProgress
    from agentenv.runner.eval import job_config, regrade, run_eval
    from agentenv.runner.results import check_config, load_results
    from agentenv.tasks import load_tasks, task_warnings

    if regrade_dir is not None:
        try:
            rows = anyio.run(regrade, regrade_dir)
        except (OSError, TaskError, SandboxError) as e:
            raise _fail(str(e)) from e
        _print_wide(summary_table(rows, f"{regrade_dir} (regraded)"))
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
    try:
        Policies(model, reasoning_effort=reasoning_effort)  # a missing key, before any output
        # a folder holding another job is refused before anything is printed or written
        config = job_config(
            tasks, model, samples=samples, keep_final=keep_final, reasoning_effort=reasoning_effort
        )
        check_config(folder, config)
    except (KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    except ConfigMismatch as e:
        raise _fail(str(e)) from e
    log.configure("info", json_file=str(folder / "log.jsonl"))  # the console has the bar
    total = len(tasks) * samples
    lines = None if err.is_terminal else ProgressLines(err, every_s=progress_every)
    bar = Progress(
        TextColumn("[bold]eval[/]"),
        BarColumn(),
        TextColumn(
            "{task.completed}/{task.total} done · {task.fields[passed]} passed · "
            "{task.fields[running]} running · {task.fields[errors]} errors · "
            "${task.fields[cost]:.4f}{task.fields[spent]}"
        ),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        disable=lines is not None,
    )
    bar_id = bar.add_task("eval", total=total, passed=0, running=0, errors=0, cost=0.0, spent="")
    said_collected = False

    def show(p: JobProgress) -> None:
        nonlocal said_collected
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
            cost=p.cost_usd,
            spent=" · budget spent" if p.budget_spent else "",
        )

    async def run() -> list[Row]:
        cluster = None
        if executor == "ray":
            from agentenv.runner import ray_executor  # agentenv[ray], checked above

            cluster = ray_executor.runner(
                model,
                attempts=attempts,
                keep_final=keep_final,
                reasoning_effort=reasoning_effort,
                address=address,
                out=folder,
            )
        return await run_eval(
            tasks,
            model,
            out=folder,
            samples=samples,
            concurrency=concurrency,
            attempts=attempts,
            keep_final=keep_final,
            reasoning_effort=reasoning_effort,
            on_progress=show,
            executor=cluster,
            max_cost_usd=max_cost,
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

    done_before = len(load_results(folder)) if (folder / "results.jsonl").exists() else 0
    if done_before:
        err.print(f"resuming {folder}: {done_before} episodes already done", highlight=False)
    try:
        with bar:
            rows = anyio.run(job)
    except KeyboardInterrupt:
        err.print(
            f"interrupted: finished episodes are in {folder}/results.jsonl; "
            "run the same command again to resume"
        )
        raise typer.Exit(130) from None
    except (ConfigMismatch, KeyError, ValueError, JobStopped, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    except SandboxError as e:
        raise _fail(str(e)) from e
    if lines is not None:
        lines.print()  # the last state, whatever the step
    many = ("s" if len(tasks) != 1 else "", "s" if samples != 1 else "")
    title = f"{len(tasks)} task{many[0]} × {samples} sample{many[1]} with {model}"
    _print_wide(summary_table(rows, title))
    out.print(phase_line(rows[-1]), highlight=False, soft_wrap=True)
    out.print(
        f"results in {folder}/ (results.jsonl, trajectories/, summary.json, log.jsonl)",
        highlight=False,
    )
    if rows[-1].stopped == "max_cost":
        left = total - rows[-1].episodes
        err.print(
            f"[bold yellow]stopped:[/] the job has spent ${rows[-1].cost_usd:.4f} of its "
            f"--max-cost ${max_cost}; {left} episodes not started. Run the same command "
            "with a higher --max-cost to go on.",
            highlight=False,
        )
        raise typer.Exit(3)


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


@app.command()
def refactor(
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
) -> None:
    """One instruction, many repos: a verified patch per repo, a report, and optionally a
    branch per repo. Re-running on the same --out resumes (and takes on repos added to the
    list)."""
    from agentenv.agent.loop import Limits
    from agentenv.errors import ConfigMismatch
    from agentenv.runner import Policies
    from agentenv.runner.budget import Budget
    from agentenv.runner.refactor import (
        RepoResult,
        apply_patches,
        run_refactor,
        totals_line,
    )
    from agentenv.runner.repos import RepoError, load_repo_list, ref_format_problem

    text = _instruction_text(instruction, instruction_file)
    job_name = out_dir.resolve().name
    if apply and (problem := ref_format_problem(f"agentenv/{job_name}")) is not None:
        raise _fail(f"--apply: {problem}, made from the --out folder's name; choose another --out")
    try:
        entries = load_repo_list(repos)
        Policies(model)  # a missing key, before any output
    except RepoError as e:
        raise _fail(str(e)) from e
    except (KeyError, ValueError) as e:
        raise _fail(str(e).strip("'\"")) from e
    out_dir.mkdir(parents=True, exist_ok=True)
    log.configure("info", json_file=str(out_dir / "log.jsonl"))

    def show(r: RepoResult) -> None:
        colour = {"changed-green": "green", "error": "red", "changed-red": "red"}.get(
            r.outcome, "yellow"
        )
        detail = " | ".join((r.why or "; ".join(r.notes)).split("\n"))
        # names and command output are text, never markup ("[stderr]" must show)
        name, shown = escape(r.repo), escape(detail[:200])
        out.print(f"[{colour}]{r.outcome:14}[/] {name}  [dim]{shown}[/]", highlight=False)

    budget = Budget(max_cost)

    async def job() -> list[RepoResult]:
        return await run_refactor(
            entries,
            text,
            model,
            out=out_dir,
            concurrency=concurrency,
            limits=Limits(max_turns=max_turns),
            on_done=show,
            test_timeout_s=test_timeout,
            command_timeout_s=command_timeout,
            budget=budget,
        )

    try:
        results = anyio.run(job)
    except KeyboardInterrupt:
        err.print(f"interrupted: finished repos are in {out_dir}/report.jsonl; run again to resume")
        raise typer.Exit(130) from None
    except (ConfigMismatch, KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    out.print(totals_line(results), highlight=False)
    failed_apply = False
    if apply:
        try:
            applied = apply_patches(entries, out_dir, job_name, text)
        except RepoError as e:
            raise _fail(str(e)) from e
        for a in applied:
            if a.made is None:
                failed_apply = True
                err.print(f"not applied: {a.repo}: {a.error}", highlight=False)
                continue
            what = {"created": "→ branch", "unchanged": "already on branch", "renamed": "→ branch"}
            note = f"  ({a.made.note})" if a.made.note else ""
            out.print(
                f"applied: {a.repo} {what[a.made.status]} {a.made.branch}{note}", highlight=False
            )
    out.print(
        f"report: {out_dir}/summary.md (and summary.json), patches in {out_dir}/patches/",
        highlight=False,
    )
    if budget.stopped:
        err.print(
            f"[bold yellow]stopped:[/] the job has spent ${budget.spent_usd:.4f} of its "
            f"--max-cost ${max_cost}; {budget.refused} repos not started. Run the same "
            "command with a higher --max-cost to go on.",
            highlight=False,
        )
        raise typer.Exit(3)
    if failed_apply:
        raise typer.Exit(1)


@app.command()
def report(
    folder: Annotated[Path, typer.Argument(help="A job folder (agentenv eval --out).")],
    totals: Annotated[
        bool, typer.Option("--totals", help="Only the per-tag subtotals and the total.")
    ] = False,
    failures: Annotated[
        bool,
        typer.Option("--failures", help="Only the episodes that failed or errored, and why."),
    ] = False,
) -> None:
    """Print a job's summary again, from its results.jsonl."""
    from agentenv.render import failures_table, phase_line, summary_table
    from agentenv.runner.eval import load_config, write_summary
    from agentenv.runner.results import load_results

    try:
        config = load_config(folder)
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from e
    results = list(load_results(folder).values())
    expected = len(config.tasks) * config.samples
    title = f"{folder}: {len(results)}/{expected} episodes with {config.model}"
    if failures:
        failed = sum(not r.passed for r in results)
        if failed:
            _print_wide(failures_table(results, f"{title}, {failed} not passed"))
        else:
            out.print(f"{title}: every one passed", highlight=False, soft_wrap=True)
        return
    rows = write_summary(folder, results, config.samples, config.tags, stopped=_stopped(folder))
    if totals:
        rows = [r for r in rows if r.kind != "task"]
    _print_wide(summary_table(rows, title))
    out.print(phase_line(rows[-1]), highlight=False, soft_wrap=True)


def _stopped(folder: Path) -> str | None:
    """Why the job's last run stopped early, as its summary.json says (report rewrites it)."""
    try:
        rows = json.loads((folder / "summary.json").read_text())
        value = rows[-1].get("stopped") if rows and isinstance(rows[-1], dict) else None
    except (OSError, ValueError):
        return None
    return value if isinstance(value, str) else None


@app.command("serve-model")
def serve_model(
    script: Annotated[
        Path | None, typer.Option(help="A JSON list of turns: {reasoning, content, tool_calls}.")
    ] = None,
    replay: Annotated[
        Path | None, typer.Option(help="A trajectory (JSON) whose turns to answer with.")
    ] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1; 0 picks a free one.")] = 8000,
    ttft: Annotated[float, typer.Option(help="Seconds before the first token.")] = 0.0,
    tokens_per_s: Annotated[
        float | None, typer.Option(help="Decode speed to simulate; default: no delay.")
    ] = None,
) -> None:
    """Serve a K3-compatible model on loopback, from a script or a recorded trajectory, to
    test environments without a key: point --model at the URL it prints."""
    from pydantic import TypeAdapter

    from agentenv.testing.k3server import DEMO_SCRIPT, K3Server, ScriptedTurn, turns_from_messages

    try:
        if script and replay:
            raise ValueError("give --script or --replay, not both")
        if script is not None:
            turns = TypeAdapter(list[ScriptedTurn]).validate_json(script.read_bytes())
        elif replay is not None:
            data = json.loads(replay.read_bytes())
            turns = turns_from_messages(data["messages"] if isinstance(data, dict) else data)
        else:
            turns = DEMO_SCRIPT
        server = K3Server(turns, port=port, ttft_s=ttft, tokens_per_s=tokens_per_s)
    except (OSError, ValueError, KeyError) as e:
        raise _fail(f"{type(e).__name__}: {e}") from e
    with server:
        out.print(
            f"serving {len(turns)} scripted turns at [bold]{server.base_url}[/] (Ctrl-C stops)"
        )
        out.print(f"  agentenv run --model {server.base_url} --instruction '...'", highlight=False)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


def main() -> None:
    """Entry point of the ``agentenv`` script."""
    # SIGTERM takes SIGINT's path: inside the event loop that cancels the main task (so
    # context managers remove their sandboxes); raising from the handler would interrupt
    # whatever line happened to run, event-loop internals included.
    if os.name == "posix":
        # A non-interactive shell starts `cmd &` with SIGINT ignored; SIGTERM must still work.
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    app()
