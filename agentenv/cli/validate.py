"""Commands about the files a user writes: ``validate`` (task folders, without running
anything) and ``schema`` (the JSON Schemas of the formats)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentenv.cli._app import ExitCode, _fail, _warn, app, err, out


@app.command()
def validate(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Task folders, folders of task folders, or instances files."),
    ],
) -> None:
    """Check tasks without running anything (no Docker, no model): task.toml (agentenv's
    format or Harbor's), instruction.md, each outputs check's cases file, and the files a
    task names. Prints every problem with its file, line and field; exit 2 if there are
    any."""
    from agentenv.problems import Problems
    from agentenv.tasks import load_tasks, task_warnings

    try:
        tasks = load_tasks(paths)
    except Problems as e:
        for problem in e.problems:
            err.print(
                f"[bold red]error:[/] {escape(str(problem))}", highlight=False, soft_wrap=True
            )
        count = len(e.problems)
        raise _fail(f"{count} problem{'s' if count != 1 else ''} found") from e
    for task in tasks:
        _warn(task_warnings(task))
    ids = ", ".join(task.id for task in tasks)
    out.print(f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} valid: {escape(ids)}")


@app.command()
def schema(
    name: Annotated[
        str | None, typer.Argument(help="task, cases, script, result or trajectory.")
    ] = None,
) -> None:
    """Print the JSON Schema of a file format agentenv reads or writes (docs/formats.md), or
    list the formats."""
    from agentenv.schemas import FORMATS, shipped

    if name is None:
        for known, (what, _) in FORMATS.items():
            out.print(f"{known:<12} {escape(what)}", highlight=False)
        return
    if name not in FORMATS:
        raise _fail(f"no format {name!r}; the formats: {', '.join(FORMATS)}", ExitCode.BAD_INPUT)
    typer.echo(shipped(name), nl=False)
