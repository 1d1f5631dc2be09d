"""Showing an episode live on a console: reasoning streamed dimmed, content as it comes, each
tool call and its result as they happen, and a closing line of figures."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentenv.agent.loop import Trajectory
from agentenv.agent.tools import ToolResult
from agentenv.model.types import StreamEvent
from agentenv.runner.summary import Row

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
    """Reward, stop reason, turns, tokens (with cache hits), dollars and time, on one line."""
    score = ""
    if traj.score is not None and traj.score.error:
        score = f"verifier error: {traj.score.error} · "
    elif traj.score is not None:
        verdict = "passed" if traj.score.passed else "failed"
        score = f"reward {traj.score.reward:.2f} ({verdict}) · "
    return score + (
        f"{traj.stop_reason} · {len(traj.turns)} turns · "
        f"{traj.prompt_tokens:,} tokens in ({traj.cached_tokens:,} cached, "
        f"{traj.cache_hit_rate:.0%} hit) · {traj.completion_tokens:,} out "
        f"({traj.reasoning_tokens:,} reasoning) · ${traj.cost_usd:.4f} · "
        f"{traj.wall_s:.1f} s ({traj.paused_s:.1f} s paused)"
        + (f" · {traj.retries} retries" if traj.retries else "")
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def summary_table(rows: list[Row], title: str) -> Table:
    """The per-task table of a job, its last row the total."""
    k = rows[-1].k if rows else 1
    table = Table(title=title)
    pass_k = (f"pass@{k}",) if k > 1 else ()
    names = ("task", "pass@1", *pass_k, "reward", "in", "cached", "out", "hit", "$", "time")
    for name in (*names, "errors"):
        table.add_column(name, justify="left" if name == "task" else "right", no_wrap=True)
    for r in rows:
        style = "bold" if r.task_id == "total" else None
        table.add_row(
            r.task_id,
            _pct(r.pass_at_1),
            *([_pct(r.pass_at_k)] if k > 1 else []),
            "—" if r.mean_reward is None else f"{r.mean_reward:.2f}",
            f"{r.prompt_tokens:,}",
            f"{r.cached_tokens:,}",
            f"{r.completion_tokens:,}",
            _pct(r.cache_hit_rate) if r.prompt_tokens else "—",
            f"{r.cost_usd:.4f}",
            f"{r.wall_s:.1f} s",
            str(r.errors) if r.errors else "",
            style=style,
            end_section=r.task_id != "total" and r is rows[-2],
        )
    return table
