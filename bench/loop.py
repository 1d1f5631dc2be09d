"""Agent-loop benchmark: what ``run_episode`` costs per turn, and what pausing saves.

Measures, in one run, the two figures of the tool-call loop (``agentenv/agent/loop.py``):

1. Loop overhead per turn. ``run_episode`` drives an in-process scripted model whose every
   turn calls one trivial tool (``bash`` running ``true``) for N turns. Overhead per turn is
   what the loop adds on top of the model and the tools: (episode wall time - sum of
   ``Turn.model_s`` - sum of ``ToolResult.duration_s``) / turns, the mean straight from the
   trajectory; the p50 from the intervals between the starts of consecutive turns (marked
   by a ``DockerSandbox`` subclass that timestamps ``pause``, or by the model wrapper when
   not pausing). With ``pause=False`` that is pure bookkeeping (history, accounting,
   limits); with ``pause=True`` the pause/resume round trip is part of ``model_s`` and is
   reported on its own, as is the wall time of a whole turn. The baseline, measured in the
   same run and the same sandbox, is one ``box.exec("true")``: the design wants the loop to
   cost at most 2 ms a turn, small next to the cheapest thing a turn can do in a sandbox.
2. CPU used by a sandbox running a busy loop during one simulated model call (the local
   K3-compatible server with a time to first token of 2 s, through the OpenAI client), the
   episode with ``pause=True`` vs ``pause=False``: the cgroup's CPU counter over the
   episode. Pausing while the model thinks should take that to about zero; what is left is
   the busy loop running while the freeze and the thaw are in flight, so the counter is
   also read right after the freeze and right before the thaw (it must not move between).

Usage: ``.venv/bin/python bench/loop.py [--quick] [--json PATH]``.

Everything created carries the label ``agentenv-bench.run=<run id>``; whatever is still
there when the run ends (error, Ctrl-C) is removed by that label, and only by it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from common import (
    BUSY_LOOP,
    Report,
    Row,
    arg_parser,
    check_ok,
    plain_row,
    print_table,
    relative_row,
    run_benchmark,
    run_sections,
    spec,
    start_report,
    step,
    summary,
)

from agentenv.agent.loop import Limits, Trajectory, run_episode
from agentenv.agent.policies import ScriptedModel
from agentenv.model.client import EventCallback, OpenAIChatModel
from agentenv.model.types import Completion, ToolCall
from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import DockerSandbox, Engine, get_engine
from agentenv.testing.k3server import K3Server, ScriptedToolCall, ScriptedTurn

WARMUP = 5
WARMUP_TURNS = 20
OVERHEAD_TARGET_MS = 2.0
CPU_RATIO_TARGET = 0.05  # "about zero": the paused episode may use up to 5% of the unpaused
INSTRUCTION = "Run `true` until told to stop."


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How many samples each measurement takes."""

    turns: int
    exec_iters: int
    ttft_s: float
    json_path: Path | None

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Config:
        """Parse the command line."""
        parser = arg_parser(__doc__)
        args = parser.parse_args(argv)
        return cls(
            turns=50 if args.quick else 200,
            exec_iters=50 if args.quick else 200,
            ttft_s=1.0 if args.quick else 2.0,
            json_path=args.json,
        )


# -- 1. loop overhead per turn ---------------------------------------------------------------


class MarkedSandbox(DockerSandbox):
    """A :class:`DockerSandbox` that notes when each ``pause`` started and how long it and
    each ``resume`` took (the loop's clock), and, with ``read_cpu``, the cgroup's CPU
    counter right after each freeze and right before each thaw. The extra work is an
    append or two per call."""

    def __init__(self, engine: Engine, container_id: str, spec: SandboxSpec, image: str):
        super().__init__(engine, container_id, spec, image)
        self.read_cpu = False
        self.pause_starts: list[float] = []
        self.pause_s: list[float] = []
        self.resume_s: list[float] = []
        self.frozen_cpu_ns: list[int] = []  # counter after pause - counter before resume

    @classmethod
    async def fresh(cls) -> MarkedSandbox:
        """A new sandbox of this run (``create`` builds ``cls`` but is typed for its base)."""
        box = await cls.create(spec())
        if not isinstance(box, MarkedSandbox):
            await box.close()
            raise TypeError(f"expected a MarkedSandbox, got {type(box).__name__}")
        return box

    async def __aenter__(self) -> MarkedSandbox:
        return self

    async def pause(self) -> None:
        """Pause, timed."""
        started = time.monotonic()
        self.pause_starts.append(started)
        await super().pause()
        self.pause_s.append(time.monotonic() - started)
        if self.read_cpu:
            self.frozen_cpu_ns.append(-(await self.cpu_usage_ns()))

    async def resume(self) -> None:
        """Resume, timed."""
        if self.read_cpu:
            self.frozen_cpu_ns[-1] += await self.cpu_usage_ns()
        started = time.monotonic()
        await super().resume()
        self.resume_s.append(time.monotonic() - started)

    def clear(self) -> None:
        """Forget the marks (between episodes)."""
        for marks in (self.pause_starts, self.pause_s, self.resume_s, self.frozen_cpu_ns):
            marks.clear()


class TimedModel:
    """A :class:`ScriptedModel` that notes when each call started and how long it took, so
    that the episode can be cut into turns (from one model call to the next)."""

    def __init__(self, inner: ScriptedModel):
        self.inner = inner
        self.starts: list[float] = []
        self.durations: list[float] = []

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> Completion:
        """The next scripted turn, timed on the loop's clock (``time.monotonic``)."""
        started = time.monotonic()
        self.starts.append(started)
        done = await self.inner.complete(messages, tools, on_event=on_event)
        self.durations.append(time.monotonic() - started)
        return done


def true_turns(n: int) -> TimedModel:
    """A model whose ``n`` turns each call ``bash`` with ``true``."""
    turns = [
        Completion(
            content="",
            reasoning_content="Once more.",
            finish_reason="tool_calls",
            tool_calls=[
                ToolCall(id=f"functions.bash:{i}", name="bash", arguments='{"command": "true"}')
            ],
        )
        for i in range(n)
    ]
    return TimedModel(ScriptedModel(turns, "bench"))


async def true_episode(
    box: MarkedSandbox, turns: int, pause: bool
) -> tuple[Trajectory, TimedModel]:
    """An episode of ``turns`` turns of ``bash true``, checked."""
    box.clear()
    model = true_turns(turns)
    traj = await run_episode(
        model, box, INSTRUCTION, task_id="bench-loop", limits=Limits(max_turns=turns), pause=pause
    )
    if traj.stop_reason != "max_turns" or len(traj.turns) != turns:
        raise RuntimeError(f"episode stopped early: {traj.stop_reason} after {len(traj.turns)}")
    for turn in traj.turns:
        for result in turn.tool_results:
            if result.error or result.exit_code != 0:
                raise RuntimeError(f"tool call failed: {result.text[-500:]}")
    return traj, model


def tool_s(traj: Trajectory, i: int) -> float:
    """Seconds the tools of turn ``i`` took (their own ``duration_s``)."""
    return sum(r.duration_s for r in traj.turns[i].tool_results)


def episode_figures(traj: Trajectory, model: TimedModel, box: MarkedSandbox) -> dict[str, Any]:
    """The episode cut into turns. The mean overhead is the trajectory's (wall - model -
    tools) / turns. The per-turn samples run from the start of one turn to the start of the
    next, where a turn starts when the loop takes its ``t0``: at the ``pause`` call with
    ``pause=True``, at the model call without (the loop does nothing in between). So there
    is one fewer sample than turns: the first turn's setup and the last turn's exit are in
    the mean only."""
    n = len(traj.turns)
    paused = bool(box.pause_starts)
    marks = box.pause_starts if paused else model.starts
    model_total = sum(t.model_s for t in traj.turns)
    tool_total = sum(tool_s(traj, i) for i in range(n))
    walls = [marks[i + 1] - marks[i] for i in range(n - 1)]
    overheads = [walls[i] - traj.turns[i].model_s - tool_s(traj, i) for i in range(n - 1)]
    figures: dict[str, Any] = {
        "turns": n,
        "wall_s": traj.wall_s,
        "model_total_s": model_total,
        "tool_total_s": tool_total,
        "overhead_mean_ms": (traj.wall_s - model_total - tool_total) / n * 1e3,
        "turn_wall_mean_ms": traj.wall_s / n * 1e3,
        "overhead": summary(overheads),
        "turn_wall": summary(walls),
        "model_call": summary(model.durations),
        "tool": summary([tool_s(traj, i) for i in range(n)]),
    }
    if paused:
        figures["pause"] = summary(box.pause_s)
        figures["resume"] = summary(box.resume_s)
        # model_s = pause + model call + resume (+ a few awaits)
        figures["pause_resume"] = summary(
            [t.model_s - d for t, d in zip(traj.turns, model.durations, strict=True)]
        )
    return figures


async def sample_exec(box: DockerSandbox, cmd: str | list[str], n: int) -> list[float]:
    """``n`` timed ``box.exec(cmd)`` round trips after a warm-up."""
    for _ in range(WARMUP):
        check_ok((await box.exec(cmd)).exit_code, f"box.exec({cmd!r})")
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        result = await box.exec(cmd)
        samples.append(time.perf_counter() - started)
        check_ok(result.exit_code, f"box.exec({cmd!r})")
    return samples


async def bench_overhead(cfg: Config, report: Report) -> None:
    """Loop overhead per turn, pause=False and pause=True, against one ``exec("true")``."""
    step(
        f"loop overhead: {cfg.exec_iters} x exec `true` (baseline), then episodes of "
        f"{cfg.turns} turns of `bash true`, pause=False and pause=True"
    )
    async with await MarkedSandbox.fresh() as box:
        if box.exec_mode != "fast":
            raise RuntimeError(f"expected the fast executor, got {box.exec_mode}")
        exec_samples = await sample_exec(box, "true", cfg.exec_iters)
        argv_samples = await sample_exec(box, ["true"], cfg.exec_iters)
        for pause in (False, True):  # warm-up: imports, pydantic schemas, executor channel
            await true_episode(box, WARMUP_TURNS, pause)
        figures = {}
        for pause in (False, True):
            traj, model = await true_episode(box, cfg.turns, pause)
            figures[pause] = episode_figures(traj, model, box)

    ex, argv = summary(exec_samples), summary(argv_samples)
    report.details["overhead"] = {
        "exec_true": ex,
        "exec_argv_true": argv,
        "pause_false": figures[False],
        "pause_true": figures[True],
    }
    base50, base_mean = ex["p50_ms"], ex["mean_ms"]
    report.rows += [
        plain_row('exec("true") p50 (baseline)', "ms", base50),
        plain_row('exec("true") mean (baseline)', "ms", base_mean),
        relative_row('  exec(["true"]) p50, no shell', "ms", argv["p50_ms"], base50, "x exec"),
    ]
    target = f"≤ {OVERHEAD_TARGET_MS:g} ms"
    for pause in (False, True):
        f = figures[pause]
        name = f"pause={pause}"
        o50, omean = f["overhead"]["p50_ms"], f["overhead_mean_ms"]
        tw = f["turn_wall"]
        report.rows += [
            relative_row(
                f"loop overhead/turn p50, {name}",
                "ms",
                o50,
                base50,
                "x exec",
                target,
                o50 <= OVERHEAD_TARGET_MS,
            ),
            relative_row(
                f"loop overhead/turn mean, {name}",
                "ms",
                omean,
                base_mean,
                "x exec",
                target,
                omean <= OVERHEAD_TARGET_MS,
            ),
            relative_row(f"  turn wall p50, {name}", "ms", tw["p50_ms"], base50, "x exec"),
            relative_row(
                f"  turn wall mean, {name}", "ms", f["turn_wall_mean_ms"], base_mean, "x exec"
            ),
        ]
    f = figures[True]
    report.rows += [
        relative_row(
            "  pause+resume/turn p50 (in model_s)",
            "ms",
            f["pause_resume"]["p50_ms"],
            base50,
            "x exec",
        ),
        relative_row(
            "  pause+resume/turn mean (in model_s)",
            "ms",
            f["pause_resume"]["mean_ms"],
            base_mean,
            "x exec",
        ),
        relative_row(
            "bash tool `true` p50 (run_tool)",
            "ms",
            figures[False]["tool"]["p50_ms"],
            base50,
            "x exec",
        ),
        relative_row(
            "scripted model call p50 (in model_s)",
            "ms",
            figures[False]["model_call"]["p50_ms"],
            base50,
            "x exec",
        ),
    ]


# -- 2. CPU of a busy loop during a model call -----------------------------------------------


async def busy_episode(server: K3Server, pause: bool) -> dict[str, Any]:
    """A one-turn episode (the model thinks for ``ttft_s``, then submits) in a fresh sandbox
    running a busy loop; the sandbox's CPU over the episode."""
    model = OpenAIChatModel(base_url=server.base_url, api_key="x")
    try:
        async with await MarkedSandbox.fresh() as box:
            check_ok((await box.exec(BUSY_LOOP)).exit_code, "busy loop start")
            await anyio.sleep(0.3)  # let it get going
            box.read_cpu = True
            before = await box.cpu_usage_ns()
            started = time.perf_counter()
            traj = await run_episode(
                model, box, "Submit.", task_id="bench-cpu", limits=Limits(max_turns=1), pause=pause
            )
            outer_s = time.perf_counter() - started
            used = await box.cpu_usage_ns() - before
    finally:
        await model.aclose()
    if traj.stop_reason != "submitted":
        raise RuntimeError(f"episode did not submit: {traj.stop_reason}")
    return {
        "pause": pause,
        "cpu_ns": used,
        "cpu_while_frozen_ns": sum(box.frozen_cpu_ns) if pause else None,
        "episode_wall_s": traj.wall_s,
        "outer_wall_s": outer_s,
        "model_s": traj.turns[0].model_s,
        "model_ttft_s": traj.turns[0].completion.ttft_s,
        "pause_s": sum(box.pause_s),
        "resume_s": sum(box.resume_s),
        "cpu_s_per_wall_s": used / 1e9 / outer_s,
    }


async def bench_cpu(cfg: Config, report: Report) -> None:
    """CPU of a busy-looping sandbox over a one-turn episode, pause=True vs pause=False."""
    step(
        f"CPU of a busy loop during a {cfg.ttft_s:g} s model call (K3Server), "
        "pause=False then pause=True"
    )
    script = [
        ScriptedTurn(
            reasoning="Thinking it over.",
            tool_calls=[ScriptedToolCall(name="submit", arguments='{"summary": "done"}')],
        )
    ]
    with K3Server(script, ttft_s=cfg.ttft_s) as server:
        running = await busy_episode(server, pause=False)
        paused = await busy_episode(server, pause=True)
    report.details["cpu"] = {"ttft_s": cfg.ttft_s, "unpaused": running, "paused": paused}
    ratio = paused["cpu_ns"] / running["cpu_ns"] if running["cpu_ns"] else None
    frozen: int = paused["cpu_while_frozen_ns"]
    report.rows += [
        relative_row(
            f"CPU over episode ({cfg.ttft_s:g} s model call): paused vs unpaused",
            "ms",
            paused["cpu_ns"] / 1e6,
            running["cpu_ns"] / 1e6,
            "x unpaused",
            f"≈ 0 (≤ {CPU_RATIO_TARGET:g}x)",
            ratio is not None and ratio <= CPU_RATIO_TARGET,
        ),
        plain_row("  CPU-s per wall-s, unpaused", "", running["cpu_s_per_wall_s"]),
        plain_row("  CPU-s per wall-s, paused", "", paused["cpu_s_per_wall_s"]),
        plain_row(
            "  paused run: CPU while frozen",
            "ms",
            frozen / 1e6,
            "= 0",
            frozen == 0,
        ),
        plain_row(
            "  paused run: pause + resume calls",
            "ms",
            (paused["pause_s"] + paused["resume_s"]) * 1e3,
        ),
        plain_row("  episode wall, unpaused", "s", running["episode_wall_s"]),
        plain_row("  episode wall, paused", "s", paused["episode_wall_s"]),
    ]


# -- output ----------------------------------------------------------------------------------


def fmt(value: float | None, unit: str) -> str:
    """A number with its unit, or a dash."""
    if value is None:
        return "—"
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2 if abs(value) >= 1 else 3
    return f"{value:,.{digits}f} {unit}".rstrip()


def fmt_ratio(row: Row) -> str:
    """The ratio, with more digits when it is small."""
    if row.ratio is None:
        return "—"
    return (
        f"{row.ratio:.2f}{row.ratio_label}"
        if row.ratio >= 1
        else f"{row.ratio:.3f}{row.ratio_label}"
    )


def show(report: Report) -> None:
    """The result table, with what the baselines are."""
    print_table(
        report,
        "loop",
        fmt,
        fmt_ratio,
        "baseline = one box.exec('true') in the same sandbox and run (p50 rows against its "
        "p50, mean rows against its mean); for CPU: the same episode with pause=False. "
        "Overhead = turn wall - model_s - tool duration_s; with pause=True, pause+resume is "
        "inside model_s.",
    )


# -- main ------------------------------------------------------------------------------------


async def run_all(cfg: Config) -> Report:
    """Every section of this benchmark, in order, on the engine's host."""
    report = await start_report(await get_engine())
    await run_sections(
        report,
        [
            ("overhead", lambda: bench_overhead(cfg, report)),
            ("cpu", lambda: bench_cpu(cfg, report)),
        ],
    )
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    cfg = Config.from_args(argv)
    return run_benchmark(cfg, lambda: run_all(cfg), show)


if __name__ == "__main__":
    sys.exit(main())
