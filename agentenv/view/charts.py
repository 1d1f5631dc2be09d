"""The job page's charts, drawn with matplotlib (its object API: no pyplot; one setting,
``text.parse_math``, changed only while drawing) as SVG files the page shows as images.
Text is drawn as paths, so no font is ever fetched; an SVG shown through ``<img>`` can run
nothing. Task and tag names are drawn as
written: never parsed as maths (``$`` in a name is a dollar sign), cut when long."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from agentenv.eval.summary import Row

MANY = 40  # past this many bars, a chart shows how the values spread instead
LABEL = 48  # characters of a task's name beside its bar

_BLUE, _GREY = "#3a6ed8", "#8a8f98"


def _figure(height: float):  # type: ignore[no-untyped-def]
    from matplotlib.figure import Figure  # imported when charts are drawn, not at import

    # text.parse_math is read when each text is made and drawn: kept off for both
    figure = Figure(figsize=(6.4, height), dpi=100, layout="constrained")
    return figure, figure.add_subplot()


def _svg(figure) -> bytes:  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    figure.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def bars(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    unit: str,
    *,
    top: float | None = None,
) -> bytes:
    """One horizontal bar per label (the largest first), or a histogram of the values when
    there are more than :data:`MANY`; the axis runs from 0 to ``top`` (a reward's 1) or to
    the largest value."""
    values = [_plain(v) for v in values]
    right = top if top is not None else (max(values, default=0.0) or 1.0)
    if len(values) > MANY:
        figure, ax = _figure(3.0)
        ax.hist(values, bins=min(30, max(5, len(values) // 10)), range=(0, right), color=_BLUE)
        ax.set_xlabel(unit)
        ax.set_ylabel("tasks")
        ax.set_title(f"{title} ({len(values)} tasks)", fontsize=11)
        return _svg(figure)
    order = sorted(range(len(values)), key=lambda i: values[i])
    figure, ax = _figure(0.6 + 0.26 * max(len(values), 1))
    # by position, then named: equal names (cut alike) stay separate bars
    ax.barh(range(len(order)), [values[i] for i in order], color=_BLUE)
    ax.set_yticks(range(len(order)), [_label(labels[i]) for i in order])
    ax.set_xlim(0, right * 1.02)
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=11)
    ax.tick_params(axis="y", labelsize=8)
    return _svg(figure)


def _plain(value: float) -> float:
    """A value a chart can draw: what a journal written by someone else may hold (NaN,
    infinities, negatives, 1e308) becomes 0 or the largest value drawn."""
    if not math.isfinite(value) or value < 0:
        return 0.0
    return min(value, 1e12)


def _label(name: str) -> str:
    return name if len(name) <= LABEL else name[: LABEL - 1] + "…"


def phases(total: Row) -> bytes:
    """Where the episodes' time went, one stacked bar of the phases."""
    phases = {name: _plain(s) for name, s in total.phases.items()}
    spent = [(name, s) for name, s in sorted(phases.items(), key=lambda kv: -kv[1]) if s][:8]
    figure, ax = _figure(2.0)
    left = 0.0
    colours = ["#3a6ed8", "#e8912d", "#4caf50", "#9c5bd1", "#d9534f", _GREY, "#26a69a", "#8d6e63"]
    for i, (name, seconds) in enumerate(spent):
        ax.barh(["time"], [seconds], left=left, color=colours[i % len(colours)], label=name)
        left += seconds
    ax.set_xlabel("seconds, all episodes")
    ax.set_yticks([])
    ax.set_title("time per phase", fontsize=11)
    figure.legend(ncols=min(len(spent), 5), fontsize=8, loc="outside lower center")
    return _svg(figure)


def _costless(rows: Sequence[Row]) -> bool:
    """Nothing to chart in dollars: every task cost 0 (an oracle's job, a local model)."""
    return not any(_plain(r.cost_usd) for r in rows if r.kind == "task")


def left_out(rows: Sequence[Row]) -> list[str]:
    """Why charts :func:`job_charts` draws for other jobs are not drawn for this one: an
    empty frame says nothing, a sentence does."""
    return ["no cost to chart: every episode cost $0"] if _costless(rows) else []


def job_charts(rows: Sequence[Row]) -> dict[str, tuple[str, bytes]]:
    """File name -> (what it shows, SVG) for a job's summary rows (tasks, tags, total)."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        return _charts(rows)


def _charts(rows: Sequence[Row]) -> dict[str, tuple[str, bytes]]:
    tasks = [r for r in rows if r.kind == "task"]
    tags = [r for r in rows if r.kind == "tag"]
    total = rows[-1]
    names = [r.task_id for r in tasks]
    charts = {
        "reward.svg": (
            "mean reward per task",
            bars(
                "mean reward per task",
                names,
                [r.mean_reward or 0.0 for r in tasks],
                "reward",
                top=1.0,
            ),
        ),
    }
    if not _costless(rows):  # all zero: an empty frame; left_out() says so instead
        costs = [r.cost_usd for r in tasks]
        charts["cost.svg"] = ("cost per task", bars("cost per task", names, costs, "dollars"))
    charts["time.svg"] = (
        "time per task",
        bars("time per task (episodes summed)", names, [r.wall_s for r in tasks], "seconds"),
    )
    if tags:
        charts["tags.svg"] = (
            "pass rate per tag",
            bars(
                "pass@1 per tag",
                [r.task_id.removeprefix("tag:") for r in tags],
                [r.pass_at_1 or 0.0 for r in tags],
                "pass@1",
                top=1.0,
            ),
        )
    if any(_plain(s) for s in total.phases.values()):
        charts["phases.svg"] = ("time per phase", phases(total))
    return charts
