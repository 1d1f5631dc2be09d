"""What the benchmarks in this folder share: the run's labels, result rows, statistics, the
table, the JSON file, and running with cleanup.

Imported as ``common``: the benchmarks run as scripts (``python bench/x.py``), which puts
this folder first on ``sys.path``; mypy, given the folder, does the same.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from collections.abc import Set as AbstractSet
from contextlib import suppress
from dataclasses import Field, asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import anyio
import docker
import docker.errors
from rich.console import Console
from rich.table import Table

from agentenv.log import configure
from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import Engine

IMAGE = "agentenv/base:bookworm"
BENCH_LABEL = "agentenv-bench.run"
RUN_ID = uuid.uuid4().hex[:12]
LABELS = {BENCH_LABEL: RUN_ID}
GIB = 1 << 30
BUSY_LOOP = "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &"

# Wide enough for the table when the output is piped to a file.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)


# -- results ---------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the result table. ``ratio`` compares agentenv's figure with the
    baseline's, oriented so that the target reads naturally; ``ratio_label`` says how."""

    what: str
    unit: str
    agentenv: float
    baseline: float | None = None
    ratio: float | None = None
    ratio_label: str = ""
    target: str = ""
    meets: bool | None = None


def relative_row(
    what: str,
    unit: str,
    ours: float,
    base: float,
    label: str,
    target: str = "(reference)",
    meets: bool | None = None,
) -> Row:
    """A row whose ratio is agentenv's figure as a multiple of the baseline's."""
    return Row(what, unit, ours, base, ours / base if base else None, label, target, meets)


def plain_row(
    what: str, unit: str, value: float, target: str = "(reference)", meets: bool | None = None
) -> Row:
    """A row without a baseline."""
    return Row(what, unit, value, target=target, meets=meets)


@dataclass
class Report:
    """Everything measured: the table rows plus the raw numbers behind them."""

    rows: list[Row] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def p50(samples: list[float]) -> float:
    """The median."""
    return statistics.median(samples)


def p99(samples: list[float]) -> float:
    """The 99th percentile (interpolated within the samples)."""
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def summary(samples_s: list[float]) -> dict[str, float]:
    """p50/p99/min/max/mean of samples given in seconds, in milliseconds."""
    ms = [s * 1e3 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": p50(ms),
        "p99_ms": p99(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "mean_ms": statistics.fmean(ms),
    }


def step(message: str) -> None:
    """Progress on the console."""
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {message}")


def check_ok(exit_code: int, what: str) -> None:
    """Fail loudly when a benchmarked command did not succeed."""
    if exit_code != 0:
        raise RuntimeError(f"{what} exited {exit_code}")


# -- sandboxes and containers we create ------------------------------------------------------


def spec(**overrides: Any) -> SandboxSpec:
    """The default sandbox spec, labelled with this run."""
    return SandboxSpec(image=IMAGE, labels=LABELS, **overrides)


def remove_container(client: docker.DockerClient, container_id: str) -> None:
    """Remove a container and its volumes, whether or not it still exists."""
    with suppress(docker.errors.NotFound):
        client.api.remove_container(container_id, force=True, v=True)


def sweep(container_ids: AbstractSet[str]) -> None:
    """Remove whatever this run left behind: the given containers and any container or image
    with our run label. Blocking; used after the event loop has ended."""
    client = docker.from_env(version="auto")
    try:
        label = f"{BENCH_LABEL}={RUN_ID}"
        found = {c["Id"] for c in client.api.containers(all=True, filters={"label": label})}
        leftovers = found | container_ids
        for container_id in leftovers:
            remove_container(client, container_id)
        images = client.api.images(filters={"label": label}, quiet=True)
        for image_id in images:
            with suppress(docker.errors.NotFound):
                client.api.remove_image(image_id, force=True)
        if leftovers or images:
            and_images = f" and {len(images)} images" if images else ""
            console.print(
                f"[yellow]cleanup: removed {len(leftovers)} leftover containers{and_images} "
                f"of run {RUN_ID}[/yellow]"
            )
    finally:
        client.close()


# -- output ----------------------------------------------------------------------------------


def verdict(meets: bool | None) -> str:
    """meets/misses in colour, or nothing for reference rows."""
    if meets is None:
        return ""
    return "[green]meets[/green]" if meets else "[red]misses[/red]"


def print_table(
    report: Report,
    name: str,
    fmt: Callable[[float | None, str], str],
    fmt_ratio: Callable[[Row], str],
    note: str,
) -> None:
    """The result table of benchmark ``name``, numbers and ratios as the benchmark formats
    them, then ``note``."""
    table = Table(title=f"agentenv {name} benchmark (run {RUN_ID})", title_justify="left")
    for column, justify in (
        ("what", "left"),
        ("agentenv", "right"),
        ("baseline", "right"),
        ("ratio", "right"),
        ("target", "left"),
        ("verdict", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in report.rows:
        table.add_row(
            row.what,
            fmt(row.agentenv, row.unit),
            fmt(row.baseline, row.unit),
            fmt_ratio(row),
            row.target,
            verdict(row.meets),
        )
    console.print(table)
    console.print(note)


def host_info(engine: Engine) -> dict[str, Any]:
    """What the numbers were measured on."""
    version = engine.client.version()
    return {
        "cpus": os.cpu_count(),
        "mem_total_gib": round(int(Path("/proc/meminfo").read_text().split()[1]) * 1024 / GIB, 1),
        "kernel": platform.release(),
        "docker": version.get("Version"),
        "api": engine.api_version,
        "python": platform.python_version(),
    }


class BenchConfig(Protocol):
    """A benchmark's configuration: a dataclass with where to write the JSON."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def json_path(self) -> Path | None:
        """Where to write the numbers, if anywhere."""


def write_json(path: Path, cfg: BenchConfig, report: Report) -> None:
    """The numbers, for machines."""
    payload = {
        "run_id": RUN_ID,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "rows": [asdict(row) for row in report.rows],
        "errors": report.errors,
        "details": report.details,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    console.print(f"wrote {path}")


# -- running ---------------------------------------------------------------------------------


def arg_parser(doc: str | None) -> argparse.ArgumentParser:
    """A command line with ``--quick`` and ``--json``, described by ``doc``'s first line."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    return parser


def describe(error: BaseException) -> str:
    """An error as one line per leaf exception (task groups wrap them in groups)."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


async def start_report(engine: Engine) -> Report:
    """An empty report holding what the numbers are measured on, which is also printed."""
    report = Report()
    host = report.details["host"] = await anyio.to_thread.run_sync(host_info, engine)
    step(
        f"run {RUN_ID}: {host['cpus']} CPUs, {host['mem_total_gib']} GiB, kernel {host['kernel']}, "
        f"Docker {host['docker']} (API {host['api']}), Python {host['python']}"
    )
    return report


async def run_sections(
    report: Report, sections: list[tuple[str, Callable[[], Awaitable[None]]]]
) -> None:
    """Every benchmark, in order; one that fails is reported and the others still run."""
    for name, run in sections:
        try:
            await run()
        except Exception as e:
            report.errors.append(f"{name}: {describe(e)}")
            console.print(f"[red]{name} failed: {describe(e)}[/red]")


def run_benchmark(
    cfg: BenchConfig,
    run_all: Callable[[], Awaitable[Report]],
    show: Callable[[Report], None],
    container_ids: AbstractSet[str] = frozenset(),
) -> int:
    """Run ``run_all``, removing everything of this run when it ends, however it ends; then
    ``show`` the report, the total time and the errors, and write the JSON. The exit status."""
    configure("warning")
    started = time.perf_counter()
    try:
        try:
            report = anyio.run(run_all)
        finally:
            sweep(container_ids)  # read only now: ids added during the run count
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted; everything run {RUN_ID} created is removed[/yellow]")
        return 130
    report.details["total_s"] = time.perf_counter() - started
    show(report)
    console.print(f"total {report.details['total_s']:.0f} s")
    for error in report.errors:
        console.print(f"[red]FAILED {error}[/red]")
    if cfg.json_path is not None:
        write_json(cfg.json_path, cfg, report)
    return 1 if report.errors else 0


def fmt(value: float | None, unit: str) -> str:
    """A number with its unit, or a dash."""
    if value is None:
        return "—"
    if unit == "":
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{digits}f} {unit}"


def fmt_ratio(row: Row) -> str:
    """The ratio with its label, or a dash."""
    return f"{row.ratio:.2f}{row.ratio_label}" if row.ratio is not None else "—"
