"""``serve-env``: an OpenEnv-compatible environment server over task folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentenv.cli._app import ExitCode, _fail, app, backend_of, out


@app.command("serve-env")
def serve_env(
    ctx: typer.Context,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Task folders, folders of them (native or Harbor), or .jsonl files."),
    ] = None,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, help="The port (0: a free one, printed).")] = 8000,
    max_concurrent_envs: Annotated[
        int,
        typer.Option(
            "--max-concurrent-envs",
            min=1,
            help="Sessions open at once; one more is told CAPACITY_REACHED and closed.",
        ),
    ] = 64,
    session_ttl: Annotated[
        float,
        typer.Option(
            "--session-ttl",
            min=0,
            help="Seconds a session may sit idle before its episode and connection are "
            "closed (0: never).",
        ),
    ] = 600.0,
    backend: Annotated[
        str | None,
        typer.Option("--backend", help="Sandbox backend (as agentenv --backend)."),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="A server on every node of this Ray cluster (its address, "
            "or auto), behind one front at HOST:PORT. See docs/openenv.md.",
        ),
    ] = None,
) -> None:
    """Serve the tasks to OpenEnv clients (TRL, torchforge, SkyRL, ...): one WebSocket
    session per episode at ws://HOST:PORT/ws, its sandbox frozen between steps, the reward
    from the hidden verifier on the step that ends it. See docs/openenv.md."""
    try:
        import websockets  # noqa: F401
    except ImportError as e:
        raise _fail(
            "serve-env needs the websockets package: pip install 'agentenv[serve-env]'",
            ExitCode.FAILED,
        ) from e
    if ray is not None:
        try:
            from agentenv.envserver.ray import NodeServersFailed, serve_on_ray
        except ImportError as e:
            raise _fail("--ray needs Ray: pip install 'agentenv[ray]'", ExitCode.FAILED) from e
        from agentenv.cli.evals import _checked_tasks

        _checked_tasks(paths, "local")  # a bad task fails here, before any node starts
        node_args = ["--session-ttl", str(session_ttl), "--backend", backend or backend_of(ctx)]
        try:
            serve_on_ray(
                ray, [str(p) for p in paths or []], host, port, max_concurrent_envs, node_args
            )
        except NodeServersFailed as e:
            raise _fail(str(e), ExitCode.FAILED) from e
        return
    import anyio

    from agentenv.cli.evals import _checked_tasks
    from agentenv.envserver import EnvServer

    tasks, _ = _checked_tasks(paths, "local")
    server = EnvServer(
        tasks,
        host=host,
        port=port,
        max_concurrent_envs=max_concurrent_envs,
        session_ttl_s=session_ttl,
        backend=backend or backend_of(ctx),
    )

    def listening() -> None:
        n = len(tasks)
        out.print(
            f"agentenv serve-env listening on {server.url} ({n} task{'s' if n != 1 else ''})",
            highlight=False,
            soft_wrap=True,
        )

    async def main() -> None:
        try:
            await server.serve_forever(ready=listening)
        except OSError as e:  # the port is taken, the address not this host's
            raise _fail(f"cannot listen on {host}:{port}: {e}", ExitCode.FAILED) from e

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.INTERRUPTED) from None
