"""``agentenv view``: a job folder or a trajectory file as a static site, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentenv.cli._app import _fail, app, out
from agentenv.view import build_site
from agentenv.view.job import NotAJob


@app.command()
def view(
    source: Annotated[Path, typer.Argument(help="A job folder (eval) or a trajectory .json.")],
    into: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Where to write the site (default: DIR/view)."),
    ] = None,
) -> None:
    """Write a self-contained site of a job (its summary, every episode sortable and
    filterable, each episode's conversation, reasoning, tool calls and checks) and print its
    path: open it in any browser, offline."""
    if not source.exists():
        raise _fail(f"{source}: no such file or folder")
    try:
        index = build_site(source, into)
    except NotAJob as e:
        raise _fail(str(e)) from e
    out.print(str(index.resolve()), highlight=False, soft_wrap=True)
