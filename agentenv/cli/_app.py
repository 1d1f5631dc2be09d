"""The ``agentenv`` application and what every command group shares: the consoles, and
how warnings and errors are printed (text, never markup)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from enum import IntEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentenv import log
from agentenv.sandbox import default_backend

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


def print_wide(table: Table) -> None:
    """Print ``table`` to stdout; to a pipe or a log, at least 140 columns wide (not
    squeezed to the 80 columns rich assumes when it is not a terminal)."""
    (out if out.is_terminal else Console(width=max(out.width, 140))).print(table)


@dataclass(frozen=True)
class Chosen:
    """What the options before the command chose (``agentenv --backend podman eval``): the
    context object of one invocation, which each command reads and passes down."""

    backend: str | None = None
    """``--backend``, if given."""


def backend_of(ctx: typer.Context) -> str:
    """The sandbox backend this invocation's sandboxes are made on: ``--backend``, else the
    default one (``AGENTENV_BACKEND``, else docker)."""
    chosen = ctx.obj if isinstance(ctx.obj, Chosen) else Chosen()
    return chosen.backend or default_backend()


@app.callback()
def _setup(
    ctx: typer.Context,
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
    # an argument each command passes down to its sandboxes (and, in the job's settings, to
    # the workers it starts), not the process's environment: nothing else is changed
    ctx.obj = Chosen(backend=backend)


def _warn(messages: list[str]) -> None:
    """Print each message as a warning (text, never markup)."""
    for message in messages:
        err.print(f"[bold yellow]warning:[/] {escape(message)}", highlight=False)


class ExitCode(IntEnum):
    """What ``agentenv``'s exit status means, the same for every command (docs/cli.md)."""

    OK = 0
    """Done: for a job, every episode (or repo) was graded, whatever its reward."""
    FAILED = 1
    """Could not do what was asked, for a reason of this machine (no engine, a full disk,
    a port in use), or a refused key stopped the job."""
    BAD_INPUT = 2
    """Nothing ran: a task file, a flag, a missing key or an ``--out`` folder is wrong
    (click's own usage errors are 2 as well)."""
    BUDGET = 3
    """The job's ``--max-cost`` is spent: episodes were left unstarted; run again with a
    higher cap to go on."""
    STOPPED = 4
    """The job stopped early because the sandbox engine or the model endpoint is down;
    unstarted episodes are not recorded: run the same command again to resume."""
    ERRORS = 5
    """The job finished, but some episodes (or repos) ended in an error instead of a grade
    (infrastructure or verifier); ``--retry-errors`` runs them again."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM; run the same command again to resume."""


EXIT_CODES = (
    "Exit codes: 0 done, every item graded; 1 failed for a reason of this machine; 2 bad "
    "input, nothing ran; 3 --max-cost spent; 4 stopped (engine or endpoint down), run again "
    "to resume; 5 finished, but some items ended in an error (--retry-errors runs them "
    "again); 130 interrupted. See docs/cli.md."
)
"""The exit codes, for a job command's ``--help`` (its epilog)."""


def _again_with(flag: str) -> str:
    """The command this process was started with, as a shell line to copy, with ``flag``
    added (once)."""
    argv = sys.argv[1:]
    return shlex.join(["agentenv", *argv, *([] if flag in argv else [flag])])


def _say_redone(items: list[str], noun: str) -> None:
    """Say which changed items (``noun``: tasks, repos) ``--redo-changed`` runs again."""
    if items:
        err.print(
            f"running the changed {noun} again (their earlier results dropped): "
            + escape(", ".join(items)),
            highlight=False,
        )


def _say_errors(count: int, noun: str, why: str) -> None:
    """Say that ``count`` items (``noun``: episode, repo) of a finished job ended in an
    error, where to read why, and the command that runs them again."""
    many = count != 1
    err.print(
        f"[bold yellow]errors:[/] {count} {noun}{'s' if many else ''} ended in an error "
        f"({escape(why)}); to run {'them' if many else 'it'} again: "
        + escape(_again_with("--retry-errors")),
        highlight=False,
        soft_wrap=True,
    )


def _fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> typer.Exit:
    """Print ``message`` as an error and return the exit to raise (bad input by default)."""
    # the message quotes paths, names and output: text, never markup ("[tool.pytest]")
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


JsonFlag = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]


AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help="The agent harness that plays each episode, installed into the task's image "
        "(mini-swe-agent, codex, claude-code, ...: see docs/gateway.md); its model calls go "
        "through a gateway that pauses the sandbox. Default: agentenv's built-in loop.",
    ),
]


def check_agent_or_exit(agent: str | None, *, backend: str, model: str) -> None:
    """Before any episode: ``--agent`` known (else exit 2 listing the known ones), playable
    with ``--model`` (exit 2) and installable on this host (else exit 1, naming the command
    that installs what is missing)."""
    if agent is None:
        return
    from agentenv.errors import AgentenvError, TaskError
    from agentenv.runner.harness import check_agent

    try:
        check_agent(agent, backend=backend, model=model)
    except TaskError as e:
        raise _fail(str(e)) from e
    except AgentenvError as e:  # this host lacks what installs it
        raise _fail(str(e), ExitCode.FAILED) from e
