"""Showing an episode live on a console: reasoning streamed dimmed, content as it comes, each
tool call and its result as they happen, and a closing line of figures."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from agentenv.agent.loop import Trajectory
from agentenv.agent.tools import ToolResult
from agentenv.model.types import StreamEvent

SHOWN_LINES = 12  # of a tool's output; the trajectory keeps all of it


class EpisodeRenderer:
    """Subscribe ``on_event`` and ``on_tool_result`` to :func:`run_episode`."""

    def __init__(self, console: Console):
        self.console = console
        self._streaming: str | None = None  # "reasoning" or "content" while a stream is open

    def _open(self, kind: str) -> None:
        if self._streaming != kind:
            self._close()
            self._streaming = kind
            label = "thinking" if kind == "reasoning" else "assistant"
            self.console.print(
                Text(f"{label}: ", style="bold dim" if kind == "reasoning" else "bold"), end=""
            )

    def _close(self) -> None:
        if self._streaming is not None:
            self.console.print()
            self._streaming = None

    def on_event(self, event: StreamEvent) -> None:
        """Print a streamed piece of the model's answer."""
        if event.kind == "reasoning":
            self._open("reasoning")
            self.console.print(Text(event.text, style="dim"), end="")
        elif event.kind == "content":
            self._open("content")
            self.console.print(Text(event.text), end="")
        elif event.kind == "tool_call_finished" and event.tool_call is not None:
            self._close()
            call = event.tool_call
            args = call.arguments if len(call.arguments) <= 300 else call.arguments[:300] + "…"
            self.console.print(Text.assemble(("→ ", "cyan"), (call.name, "bold cyan"), " ", args))
        elif event.kind == "usage":
            self._close()

    def on_tool_result(self, result: ToolResult) -> None:
        """Print a tool's result: its status and the first lines of its output."""
        status = "error" if result.error else "ok"
        if result.exit_code is not None:
            status += f", exit {result.exit_code}"
        style = "red" if result.error else "green"
        self.console.print(
            Text.assemble(
                ("← ", style), (result.name, style), f" ({status}, {result.duration_s:.2f} s)"
            )
        )
        lines = result.output.rstrip("\n").splitlines()
        shown = lines[:SHOWN_LINES]
        if len(lines) > SHOWN_LINES:
            shown.append(f"… {len(lines) - SHOWN_LINES} more lines")
        for line in shown:
            self.console.print(Text("  " + line, style="dim"))


def summary_line(traj: Trajectory) -> str:
    """Stop reason, turns, tokens (with cache hits), dollars and time, on one line."""
    return (
        f"{traj.stop_reason} · {len(traj.turns)} turns · "
        f"{traj.prompt_tokens:,} tokens in ({traj.cached_tokens:,} cached, "
        f"{traj.cache_hit_rate:.0%} hit) · {traj.completion_tokens:,} out "
        f"({traj.reasoning_tokens:,} reasoning) · ${traj.cost_usd:.4f} · "
        f"{traj.wall_s:.1f} s ({traj.paused_s:.1f} s paused)"
        + (f" · {traj.retries} retries" if traj.retries else "")
    )
