"""The ``agentenv`` application and what every command group shares: the consoles, and
how warnings and errors are printed (text, never markup)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from agentenv import log

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Run AI agents in sandboxes (Docker or Podman) that pause while the model thinks.",
)
images_app = typer.Typer(no_args_is_help=True, help="Images without a registry.")
sandbox_app = typer.Typer(no_args_is_help=True, help="Sandboxes on this engine.")
app.add_typer(images_app, name="images")
app.add_typer(sandbox_app, name="sandbox")
out = Console()
err = Console(stderr=True)


@app.callback()
def _setup(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="Sandbox backend for every sandbox this command makes: docker (default), "
            "podman, or a registered one. Same as AGENTENV_BACKEND.",
        ),
    ] = None,
) -> None:
    log.configure("info" if verbose else "warning")
    if backend is not None:
        # the process default (SandboxSpec's), so that every path to a sandbox, and the
        # workers this process starts, make theirs on it
        os.environ["AGENTENV_BACKEND"] = backend


def _warn(messages: list[str]) -> None:
    """Print each message as a warning (text, never markup)."""
    for message in messages:
        err.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False)


def _fail(message: str) -> typer.Exit:
    # the message quotes paths, names and output: text, never markup ("[tool.pytest]")
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(1)


JsonFlag = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
