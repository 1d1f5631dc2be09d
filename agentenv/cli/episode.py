"""Commands about one episode: ``run`` and ``serve-model`` (a local K3-compatible model)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.markup import escape

from agentenv.agent.loop import Trajectory
from agentenv.cli._app import (
    AgentOption,
    ExitCode,
    _fail,
    _warn,
    app,
    backend_of,
    check_agent_or_exit,
    out,
)
from agentenv.errors import ModelError, NoRoute
from agentenv.sandbox import SandboxError
from agentenv.sandbox.images import BASE_IMAGE


@app.command()
def run(
    ctx: typer.Context,
    task: Annotated[
        Path | None, typer.Argument(help="A task folder (task.toml, instruction.md, workspace/).")
    ] = None,
    model: Annotated[
        str, typer.Option("--model", "-m", help="kimi-k3, an OpenAI-compatible URL, oracle, null.")
    ] = "kimi-k3",
    agent: AgentOption = None,
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
    from agentenv.cli.render import EpisodeRenderer, summary_line
    from agentenv.errors import TaskError
    from agentenv.runner import Policies, run_task
    from agentenv.tasks import Task, load_task, task_warnings

    backend = backend_of(ctx)
    check_agent_or_exit(agent, backend=backend, model=model)  # before anything runs
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
        if agent is not None:
            from agentenv.runner.harness import refuse_task, resolve_agent

            harness = resolve_agent(agent)
            assert harness is not None
            refuse_task(the_task, harness)  # a multi-step task, by name
        source = Policies(model, reasoning_effort=reasoning_effort)
        policy = source.for_task(the_task)
    except (TaskError, KeyError, ValueError, NoRoute) as e:
        raise _fail(str(e).strip("'\"")) from e
    renderer = EpisodeRenderer(out)
    played = f" played by {escape(agent)}" if agent else ""
    out.print(f"[bold]{escape(the_task.id)}[/] with {escape(model)}{played}", highlight=False)

    async def episode() -> Trajectory:
        try:
            traj, _ = await run_task(
                the_task,
                policy,
                pause=not no_pause,
                on_event=renderer.on_event,
                on_tool_result=renderer.on_tool_result,
                backend=backend,
                agent=agent,
            )
            return traj
        finally:
            await source.aclose()

    try:
        traj = anyio.run(episode)
    except (SandboxError, ModelError) as e:
        raise _fail(f"{type(e).__name__}: {e}", ExitCode.FAILED) from e
    if save is not None:
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(traj.model_dump_json(indent=1))
    out.print(f"[bold]{summary_line(traj)}[/]", highlight=False, soft_wrap=True)


@app.command("serve-model")
def serve_model(
    script: Annotated[
        Path | None,
        typer.Option(
            help="A JSON list of turns, answered in order (the last repeats): "
            '[{"reasoning": "...", "content": "...", "tool_calls": [{"name": "bash", '
            '"arguments": "{\\"command\\": \\"ls\\"}"}]}]. A tool call\'s arguments '
            "are a string holding JSON. Schema: agentenv schema script (docs/formats.md)."
        ),
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
    from agentenv.problems import Problems
    from agentenv.testing.k3server import DEMO_SCRIPT, K3Server, turns_from_messages
    from agentenv.testing.script import read_script

    try:
        if script and replay:
            raise ValueError("give --script or --replay, not both")
        if script is not None:
            turns = read_script(script)
        elif replay is not None:
            data = json.loads(replay.read_bytes())
            turns = turns_from_messages(data["messages"] if isinstance(data, dict) else data)
        else:
            turns = DEMO_SCRIPT
        server = K3Server(turns, port=port, ttft_s=ttft, tokens_per_s=tokens_per_s)
    except Problems as e:
        raise _fail(str(e)) from e
    except (OSError, ValueError, KeyError) as e:
        raise _fail(f"{type(e).__name__}: {e}") from e
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(server)  # it listens from here
        except OSError as e:
            raise _fail(f"cannot listen on 127.0.0.1:{port}: {e}", ExitCode.FAILED) from e
        out.print(
            f"serving {len(turns)} scripted turns at [bold]{server.base_url}[/] (Ctrl-C stops)"
        )
        out.print(f"  agentenv run --model {server.base_url} --instruction '...'", highlight=False)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
