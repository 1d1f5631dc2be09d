"""``agentenv view``: a job folder or a trajectory file as a static site, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentenv.cli._app import ExitCode, _fail, app, out
from agentenv.view import build_site
from agentenv.view.files import Refused
from agentenv.view.job import NotAJob
from agentenv.view.serve import serve


@app.command()
def view(
    source: Annotated[Path, typer.Argument(help="A job folder (eval) or a trajectory .json.")],
    into: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Where to write the site (default: DIR/view)."),
    ] = None,
    serve_it: Annotated[
        bool,
        typer.Option(
            "--serve", help="Serve it on 127.0.0.1 and build it again while the job runs."
        ),
    ] = False,
    port: Annotated[int, typer.Option(min=0, max=65535, help="With --serve; 0: any.")] = 8787,
) -> None:
    """Write a self-contained site of a job (its summary and charts, every episode sortable
    and filterable, each episode's conversation, reasoning, tool calls and checks) and print
    its path: open it in any browser, offline. With --serve, serve it on loopback instead,
    refreshed while the job is still running."""
    if not source.exists():
        raise _fail(f"{source}: no such file or folder")
    try:
        if serve_it:

            def ready(url: str) -> None:
                out.print(f"serving {url} (Ctrl-C stops)", highlight=False, soft_wrap=True)

            try:
                serve(source, into, port=port, ready=ready)
            except KeyboardInterrupt:
                return
            except OSError as e:
                raise _fail(
                    f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}", ExitCode.FAILED
                ) from e
            return
        index = build_site(source, into)
    except (NotAJob, Refused) as e:
        raise _fail(str(e)) from e
    except OSError as e:  # the site's folder cannot be written
        raise _fail(f"cannot write the site: {e}", ExitCode.FAILED) from e
    out.print(str(index.resolve()), highlight=False, soft_wrap=True)
