"""Showing an episode live on a console: reasoning streamed dimmed, content as it comes, each
tool call and its result as they happen, and a closing line of figures."""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentenv.agent.loop import Trajectory
from agentenv.agent.tools import ToolResult
from agentenv.eval.jobs import Progress
from agentenv.eval.summary import Row, natural_key
from agentenv.model.types import StreamEvent
from agentenv.runner.results import EpisodeResult

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
    if traj.score is not None and traj.score.steps:  # a multi-step task's, each step run
        steps = ", ".join(
            f"{s.name} {'error' if s.error else f'{s.reward:.2f}'}"
            + (" (stopped)" if s.stopped else "")
            for s in traj.score.steps
        )
        score += f"steps: {steps} · "
    return score + (
        f"{traj.stop_reason} · {len(traj.turns)} turn{'' if len(traj.turns) == 1 else 's'} · "
        f"{traj.prompt_tokens:,} tokens in ({traj.cached_tokens:,} cached, "
        f"{traj.cache_hit_rate:.0%} hit) · {traj.completion_tokens:,} out "
        f"({traj.reasoning_tokens:,} reasoning) · ${traj.cost_usd:.4f} · "
        f"{traj.wall_s:.1f} s ({traj.paused_s:.1f} s paused)"
        + (f" · {traj.retries} retries" if traj.retries else "")
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _usd(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def summary_table(rows: list[Row], title: str) -> Table:
    """The per-task table of a job, then its per-tag subtotals, its last row the total.
    ``$/solved`` is every dollar spent over the episodes that passed; ``time`` is the sum
    of the episodes' wall times (the job's own is in :func:`phase_line`)."""
    k = rows[-1].k if rows else 1
    table = Table(title=title)
    pass_k = (f"pass@{k}",) if k > 1 else ()
    names = ("task", "pass@1", *pass_k, "reward", "in", "cached", "out", "hit", "$", "$/solved")
    refused = ("refused",) if rows and rows[-1].refused else ()
    steps = ("steps",) if any(r.steps for r in rows) else ()  # a multi-step task's
    for name in (*names, "time", "errors", *refused, *steps):
        table.add_column(name, justify="left" if name == "task" else "right", no_wrap=True)
    for i, r in enumerate(rows):
        after = rows[i + 1].kind if i + 1 < len(rows) else None
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
            _usd(r.usd_per_solved),
            f"{r.wall_s:.1f} s",
            str(r.errors) if r.errors else "",
            *([str(r.refused) if r.refused else ""] if refused else []),
            *([step_text(r)] if steps else []),
            style="bold" if r.kind == "total" else ("italic" if r.kind == "tag" else None),
            end_section=after is not None and after != r.kind,
        )
    return table


def step_text(row: Row) -> str:
    """A multi-step task's mean reward per step, in order, with how many episodes reached
    a step when not all did: ``setup 1.00 · build 0.50 (2/3 reached)``."""
    return " · ".join(
        f"{name} {s.reward:.2f}"
        + (f" ({s.reached}/{row.graded} reached)" if s.reached < row.graded else "")
        for name, s in row.steps.items()
    )


PHASES = ("prepare", "create", "harness", "model", "tools", "loop", "finish", "verify", "teardown")


def phase_line(total: Row) -> str:
    """Where the time went, on one line: the job's wall time and episodes per second, the
    episodes' summed time, and its split by phase in the order an episode runs them."""
    parts = []
    if total.job_wall_s is not None:
        rate = f" ({total.episodes_per_s:.2f} episodes/s)" if total.episodes_per_s else ""
        parts.append(f"job {_seconds(total.job_wall_s)} wall{rate}")
    parts.append(f"episodes {_seconds(total.wall_s)} in all")
    line = " · ".join(parts)
    spent = sum(total.phases.values())
    if spent > 0:
        order = [*PHASES, *sorted(set(total.phases) - set(PHASES))]
        shares = [
            f"{name} {_seconds(total.phases[name])} ({total.phases[name] / spent:.0%})"
            for name in order
            if total.phases.get(name, 0.0) > 0
        ]
        line += ": " + ", ".join(shares)
    return line


def _seconds(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


def failure_reason(result: EpisodeResult) -> str:
    """Why an episode did not pass, on one line: its error, or the checks that failed."""
    if result.error is not None:
        reason = f"{result.outcome}: {result.error}"
    elif result.score is not None:
        failed = [c for c in result.score.checks if not c.passed]
        reason = "; ".join(
            f"{c.name}: {c.detail.strip().splitlines()[0] if c.detail.strip() else 'failed'}"
            for c in failed[:3]
        )
        if len(failed) > 3:
            reason += f"; … {len(failed) - 3} more checks failed"
        reason = reason or f"reward {result.reward}"
    else:
        reason = result.outcome
    return " ".join(reason.split())[:300]


def failures_table(results: list[EpisodeResult], title: str) -> Table:
    """The episodes that did not pass (failed or errored), each with its reason."""
    table = Table(title=title)
    for name in ("task", "sample", "outcome", "reward", "reason"):
        table.add_column(name, no_wrap=name != "reason", overflow="fold")
    for r in sorted(results, key=lambda r: (natural_key(r.task_id), r.sample)):
        if r.passed:
            continue
        outcome = "failed" if r.outcome == "graded" else r.outcome
        reward = "—" if r.reward is None else f"{r.reward:.2f}"
        table.add_row(r.task_id, str(r.sample), outcome, reward, failure_reason(r))
    return table


class ProgressLines:
    """Progress as plain lines, for a log or a pipe where a bar shows nothing until the
    end: one line each time another ``every_frac`` of the episodes is done, and one every
    ``every_s`` seconds meanwhile (call :meth:`tick` periodically)."""

    def __init__(self, console: Console, *, every_s: float = 30.0, every_frac: float = 0.05):
        self.console = console
        self.every_s = every_s
        self.every_frac = every_frac
        self.started = time.monotonic()
        self._last_at = self.started
        self._last_step = -1
        self._last: Progress | None = None
        self._printed: Progress | None = None

    def update(self, progress: Progress) -> None:
        """Take the job's progress; print when another step of episodes is done."""
        self._last = progress
        step = int(progress.done / max(1, progress.total) / self.every_frac)
        if step != self._last_step:
            self._last_step = step
            self.print()

    def tick(self) -> None:
        """Print if nothing was printed for ``every_s`` seconds (even if nothing changed:
        a line now and then says the job is alive)."""
        if self._last is not None and time.monotonic() - self._last_at >= self.every_s:
            self._printed = None
            self.print()

    def print(self) -> None:
        """Print the latest progress now (the job's end, say), unless just printed."""
        p = self._last
        if p is None or p == self._printed:
            return
        self._printed = p
        self._last_at = time.monotonic()
        elapsed = _seconds(self._last_at - self.started)
        spent = " · budget spent, starting no more" if p.budget_spent else ""
        failing = f" ({p.failed_requests} model requests failed)" if p.failed_requests else ""
        self.console.print(
            f"eval {p.done}/{p.total} done ({p.done / max(1, p.total):.0%}) · {p.passed} passed"
            f" · {p.running} running · {p.errors} errors{failing} · ${p.cost_usd:.4f} · {elapsed}"
            f" elapsed{spent}",
            highlight=False,
            soft_wrap=True,
        )
