"""Sandbox benchmark: agentenv against raw docker-py baselines measured in the same run.

Measures the figures of DESIGN.md ("Figures to reach") and prints each as a ratio against
its baseline:

1. exec round trip of ``true``: fast executor vs ``container.exec_run`` (and the
   ``docker-exec`` fallback for reference);
2. create -> first command, cold and from a warm :class:`SandboxPool`;
3. pause and resume latency vs ``container.pause()``/``unpause()``;
4. CPU used by a paused sandbox running a busy loop;
5. host memory per paused sandbox, and the capacity that implies for 24 GiB;
6. ``fork(snapshot, 8)`` vs redoing an expensive setup in 8 fresh sandboxes.

Usage: ``.venv/bin/python bench/sandbox.py [--quick] [--hold N] [--json PATH]``.

Everything created carries the label ``agentenv-bench.run=<run id>``; whatever is still
there when the run ends (error, Ctrl-C) is removed by that label, and only by it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import docker
from common import (
    BUSY_LOOP,
    GIB,
    IMAGE,
    LABELS,
    Report,
    Row,
    arg_parser,
    check_ok,
    console,
    fmt,
    fmt_ratio,
    plain_row,
    print_table,
    relative_row,
    remove_container,
    run_benchmark,
    run_sections,
    spec,
    start_report,
    step,
    summary,
)
from docker.models.containers import Container

from agentenv.sandbox import (
    Sandbox,
    SandboxClosed,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
    Snapshot,
    fork,
    remove_snapshot,
    sandbox,
)
from agentenv.sandbox.docker import DockerSandbox, Engine, get_engine

CAPACITY_RAM = 24 * GIB
FORK_N = 8
WARMUP = 5
OF_BASELINE = "x of baseline"

# The "expensive setup": write 200 Python modules, byte-compile them, then wait a second as
# if installing dependencies. About 2 s in one sandbox on this host.
GENERATE = (
    "import os\n"
    "os.makedirs('/workspace/proj', exist_ok=True)\n"
    "for i in range(200):\n"
    "    body = ''.join(\n"
    "        f'def f{j}(x):\\n    return [x * k for k in range({j})]\\n\\n' for j in range(250)\n"
    "    )\n"
    "    with open(f'/workspace/proj/mod_{i}.py', 'w') as f:\n"
    "        f.write(body)\n"
)
SETUP = [
    "/bin/sh",
    "-c",
    'python3 -c "$1" && python3 -m compileall -q /workspace/proj && sleep 1 '
    "&& touch /workspace/proj/.ready",
    "setup",
    GENERATE,
]
CHECK_SETUP = "test -f /workspace/proj/.ready && ls /workspace/proj/__pycache__ | wc -l"


# -- configuration and results ---------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How many samples each measurement takes."""

    exec_iters: int
    fallback_iters: int
    create_samples: int
    pool_size: int
    pause_cycles: int
    hold: int
    json_path: Path | None

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Config:
        """Parse the command line."""
        parser = arg_parser(__doc__)
        parser.add_argument(
            "--hold", type=int, default=None, help="paused sandboxes to hold (100; 20 if --quick)"
        )
        args = parser.parse_args(argv)
        hold = args.hold if args.hold is not None else (20 if args.quick else 100)
        if hold < 1:
            parser.error("--hold must be at least 1")
        return cls(
            exec_iters=30 if args.quick else 200,
            fallback_iters=20 if args.quick else 100,
            create_samples=3 if args.quick else 10,
            pool_size=4,
            pause_cycles=20 if args.quick else 100,
            hold=hold,
            json_path=args.json,
        )


def faster_row(what: str, unit: str, ours: float, base: float, at_least: float) -> Row:
    """A row where agentenv should be ``at_least`` times faster than the baseline."""
    speedup = base / ours
    target = f"≥ {at_least:g}x faster"
    return Row(what, unit, ours, base, speedup, "x faster", target, speedup >= at_least)


# -- containers we create --------------------------------------------------------------------


class RawContainers:
    """Baseline containers started with plain docker-py; each is removed by its id."""

    def __init__(self, client: docker.DockerClient):
        self.client = client
        self.ids: set[str] = set()

    def run(self) -> Container:
        """``containers.run`` exactly as a docker-py user would (blocking)."""
        container = self.client.containers.run(
            IMAGE, ["sleep", "infinity"], detach=True, network_mode="none", labels=LABELS
        )
        self.ids.add(container.id)
        return container

    async def remove(self, container: Container) -> None:
        """Remove one baseline container, even while being cancelled."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(remove_container, self.client, container.id)
            self.ids.discard(container.id)

    @asynccontextmanager
    async def started(self) -> AsyncIterator[Container]:
        """A running baseline container, removed when the block ends."""
        container = await anyio.to_thread.run_sync(self.run)
        try:
            yield container
        finally:
            await self.remove(container)


async def close_all(boxes: list[Sandbox]) -> None:
    """Close sandboxes concurrently, even while being cancelled."""
    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            for box in boxes:
                tg.start_soon(box.close)


# -- timing helpers --------------------------------------------------------------------------


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    """Seconds ``fn()`` took."""
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


def _timed_sync(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


async def timed_blocking(fn: Callable[[], object]) -> float:
    """Seconds a blocking docker-py call took, timed inside its worker thread so that the
    thread hand-off is not charged to the baseline."""
    return await anyio.to_thread.run_sync(_timed_sync, fn)


def raw_exec_true(container: Container) -> None:
    """``exec_run(["true"])``, checked."""
    result = container.exec_run(["true"])
    check_ok(result.exit_code, "exec_run(['true'])")


async def box_exec_true(box: Sandbox) -> None:
    """``box.exec(["true"])``, checked."""
    result = await box.exec(["true"])
    check_ok(result.exit_code, "box.exec(['true'])")


async def sample_box_exec(box: Sandbox, n: int) -> list[float]:
    """``n`` timed exec round trips of ``true`` after a warm-up."""
    for _ in range(WARMUP):
        await box_exec_true(box)
    return [await timed(lambda: box_exec_true(box)) for _ in range(n)]


async def sample_raw_exec(container: Container, n: int) -> list[float]:
    """``n`` timed ``exec_run(["true"])`` round trips after a warm-up."""
    for _ in range(WARMUP):
        await anyio.to_thread.run_sync(raw_exec_true, container)
    return [await timed_blocking(lambda: raw_exec_true(container)) for _ in range(n)]


# -- 1. exec round trip ----------------------------------------------------------------------


async def bench_exec(cfg: Config, raw: RawContainers, report: Report) -> None:
    """Round trip of ``true``: fast executor, docker-exec fallback, raw ``exec_run``."""
    step(f"exec round trip: {cfg.exec_iters} x fast, {cfg.fallback_iters} x fallback, raw")
    async with sandbox(spec()) as box:
        mode = getattr(box, "exec_mode", "?")
        if mode != "fast":
            raise RuntimeError(f"expected the fast executor, got {mode}")
        fast = await sample_box_exec(box, cfg.exec_iters)
    async with sandbox(spec(executor="docker-exec")) as box:
        fallback = await sample_box_exec(box, cfg.fallback_iters)
    async with raw.started() as container:
        baseline = await sample_raw_exec(container, cfg.exec_iters)

    f, b, d = summary(fast), summary(baseline), summary(fallback)
    report.details["exec"] = {"fast": f, "raw_exec_run": b, "docker_exec_fallback": d}
    for q in ("p50", "p99"):
        report.rows.append(faster_row(f"exec `true` {q}", "ms", f[f"{q}_ms"], b[f"{q}_ms"], 20))
    report.rows.append(
        relative_row(
            "exec `true` p50, docker-exec fallback", "ms", d["p50_ms"], b["p50_ms"], OF_BASELINE
        )
    )


# -- 2. create -> first command --------------------------------------------------------------


async def cold_start_box() -> float:
    """Seconds from ``DockerSandbox.create()`` to the end of the first ``exec(["true"])``."""
    started = time.perf_counter()
    box = await DockerSandbox.create(spec())
    try:
        await box_exec_true(box)
        return time.perf_counter() - started
    finally:
        await box.close()


async def cold_start_raw(raw: RawContainers) -> float:
    """Seconds from ``containers.run()`` to the end of the first ``exec_run(["true"])``."""
    holder: list[Container] = []

    def run_and_exec() -> None:
        holder.append(raw.run())
        raw_exec_true(holder[0])

    try:
        return await timed_blocking(run_and_exec)
    finally:
        if holder:
            await raw.remove(holder[0])


async def wait_ready(pool: SandboxPool, count: int, timeout: float = 120) -> None:
    """Wait until the pool holds ``count`` paused sandboxes."""
    with anyio.fail_after(timeout):
        while pool.ready < count:
            await anyio.sleep(0.02)


async def warm_start(pool: SandboxPool) -> float:
    """Seconds of ``pool.acquire()`` plus the first ``exec(["true"])``."""
    started = time.perf_counter()
    box = await pool.acquire()
    try:
        await box_exec_true(box)
        return time.perf_counter() - started
    finally:
        await box.close()


async def bench_create(cfg: Config, raw: RawContainers, report: Report) -> None:
    """Cold create -> first command vs ``containers.run`` + ``exec_run``; warm pool."""
    n = cfg.create_samples
    step(f"create -> first command: {n} cold samples each (interleaved), {n} warm-pool samples")
    cold: list[float] = []
    baseline: list[float] = []
    for _ in range(n):
        baseline.append(await cold_start_raw(raw))
        cold.append(await cold_start_box())

    warm: list[float] = []
    fill_started = time.perf_counter()
    async with SandboxPool(spec(), size=cfg.pool_size) as pool:
        await wait_ready(pool, cfg.pool_size)
        fill_s = time.perf_counter() - fill_started
        for _ in range(n):
            await wait_ready(pool, cfg.pool_size)
            warm.append(await warm_start(pool))

    c, b, w = summary(cold), summary(baseline), summary(warm)
    report.details["create"] = {
        "cold": c,
        "raw_run_exec_run": b,
        "warm_pool": w,
        "pool_fill_s": fill_s,
    }
    ratio = c["p50_ms"] / b["p50_ms"]
    warm_name = f"create → first cmd p50, warm pool ({cfg.pool_size})"
    report.rows += [
        relative_row(
            "create → first cmd p50, cold",
            "ms",
            c["p50_ms"],
            b["p50_ms"],
            OF_BASELINE,
            "≤ 1.2x",
            ratio <= 1.2,
        ),
        relative_row(
            warm_name, "ms", w["p50_ms"], b["p50_ms"], OF_BASELINE, "≤ 20 ms", w["p50_ms"] <= 20
        ),
        relative_row("  warm pool p99", "ms", w["p99_ms"], b["p99_ms"], OF_BASELINE),
    ]


# -- 3. pause and resume ---------------------------------------------------------------------


async def sample_box_pause(box: Sandbox, n: int) -> tuple[list[float], list[float]]:
    """``n`` timed pause/resume cycles of a sandbox."""
    pauses, resumes = [], []
    for _ in range(n):
        pauses.append(await timed(box.pause))
        resumes.append(await timed(box.resume))
    return pauses, resumes


async def sample_raw_pause(container: Container, n: int) -> tuple[list[float], list[float]]:
    """``n`` timed ``pause()``/``unpause()`` cycles of a raw container."""
    pauses, resumes = [], []
    for _ in range(n):
        pauses.append(await timed_blocking(container.pause))
        resumes.append(await timed_blocking(container.unpause))
    return pauses, resumes


async def bench_pause(cfg: Config, raw: RawContainers, report: Report) -> None:
    """Pause/resume latency vs raw ``pause()``/``unpause()``."""
    step(f"pause/resume: {cfg.pause_cycles} cycles each")
    async with sandbox(spec()) as box:
        await box.pause()  # warm-up
        await box.resume()
        box_pause, box_resume = await sample_box_pause(box, cfg.pause_cycles)
        await box_exec_true(box)  # still usable afterwards
    async with raw.started() as container:
        await anyio.to_thread.run_sync(container.pause)
        await anyio.to_thread.run_sync(container.unpause)
        raw_pause, raw_resume = await sample_raw_pause(container, cfg.pause_cycles)

    details: dict[str, Any] = {}
    pairs = (("pause", box_pause, raw_pause), ("resume", box_resume, raw_resume))
    for name, ours, theirs in pairs:
        o, t = summary(ours), summary(theirs)
        details[name] = {"agentenv": o, "raw": t}
        for q, limit in (("p50", 15.0), ("p99", 50.0)):
            ours_q, theirs_q = o[f"{q}_ms"], t[f"{q}_ms"]
            report.rows.append(
                relative_row(
                    f"{name} {q}",
                    "ms",
                    ours_q,
                    theirs_q,
                    OF_BASELINE,
                    f"≤ {limit:g} ms",
                    ours_q <= limit,
                )
            )
    report.details["pause"] = details


# -- 4. CPU of a paused busy loop ------------------------------------------------------------


async def cpu_rate(box: Sandbox, seconds: float) -> tuple[int, float]:
    """CPU nanoseconds the sandbox used between two ``cpu_usage_ns()`` readings about
    ``seconds`` apart, and the wall time between the readings. A reading can take up to a
    second to return (Docker's stats collector ticks once a second), so the window is
    measured rather than assumed."""
    before = await box.cpu_usage_ns()
    first = time.perf_counter()
    await anyio.sleep(seconds)
    used = await box.cpu_usage_ns() - before
    return used, time.perf_counter() - first


async def bench_cpu(report: Report) -> None:
    """CPU used by a busy loop over ~1 s, running vs paused."""
    step("CPU of a busy loop over ~1 s: running, then paused, then resumed")
    async with sandbox(spec()) as box:
        started = await box.exec(BUSY_LOOP)
        check_ok(started.exit_code, "busy loop start")
        await anyio.sleep(0.3)
        running, running_s = await cpu_rate(box, 1.0)
        await box.pause()
        paused, paused_s = await cpu_rate(box, 1.0)
        await box.resume()
        again, again_s = await cpu_rate(box, 1.0)  # the loop survived the pause
    report.details["cpu"] = {
        "running_ns": running,
        "running_window_s": running_s,
        "paused_ns": paused,
        "paused_window_s": paused_s,
        "resumed_ns": again,
        "resumed_window_s": again_s,
    }
    report.rows.append(
        relative_row(
            "CPU of a busy loop over ~1 s: paused vs running",
            "ms",
            paused / 1e6,
            running / 1e6,
            OF_BASELINE,
            "paused = 0",
            paused == 0,
        )
    )
    if again < running / 2:
        console.print(f"[yellow]busy loop used only {again / 1e6:.0f} ms after resume[/yellow]")


# -- 5. memory per paused sandbox ------------------------------------------------------------


def mem_available() -> int:
    """Host ``MemAvailable`` in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


async def container_memory(engine: Engine, container_id: str) -> int:
    """A container's memory use as ``docker stats`` shows it (usage minus inactive file)."""
    stats = await engine.run(engine.api.stats, container_id, stream=False, one_shot=True)
    mem = stats.get("memory_stats") or {}
    inner = mem.get("stats") or {}
    inactive = inner.get("total_inactive_file", inner.get("inactive_file", 0))
    return int(mem.get("usage", 0)) - int(inactive)


async def stats_total(engine: Engine, boxes: list[Sandbox]) -> int:
    """Sum of ``container_memory`` over the sandboxes."""
    totals: list[int] = []

    async def one(box: Sandbox) -> None:
        totals.append(await container_memory(engine, box.id))

    async with anyio.create_task_group() as tg:
        for box in boxes:
            tg.start_soon(one, box)
    return sum(totals)


async def pause_retrying(box: Sandbox, failures: list[str], attempts: int = 5) -> None:
    """Pause, retrying a failed freeze (cgroup v1's freezer can fail under load: "OCI
    runtime pause failed: unable to freeze"); each failure is recorded in ``failures``."""
    for attempt in range(1, attempts + 1):
        try:
            await box.pause()
            return
        except (SandboxClosed, SandboxUnavailable):
            raise
        except SandboxError as e:
            failures.append(str(e))
            if attempt == attempts:
                raise
            await anyio.sleep(0.1 * attempt)


async def create_paused(boxes: list[Sandbox], failures: list[str]) -> None:
    """Create one sandbox and pause it."""
    box = await DockerSandbox.create(spec())
    boxes.append(box)
    await pause_retrying(box, failures)


async def bench_hold(cfg: Config, engine: Engine, report: Report) -> None:
    """Hold ``cfg.hold`` paused sandboxes at once; host memory per sandbox."""
    n = cfg.hold
    step(f"holding {n} paused sandboxes (created concurrently, creation paced by the engine)")
    boxes: list[Sandbox] = []
    failures: list[str] = []
    before = mem_available()
    try:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(create_paused, boxes, failures)
        create_s = time.perf_counter() - started
        step(f"  {len(boxes)} paused after {create_s:.1f} s; letting memory settle")
        await anyio.sleep(3)
        after = mem_available()
        stats_sum = await stats_total(engine, boxes)
        held = sum(1 for box in boxes if box.paused)
    finally:
        close_started = time.perf_counter()
        await close_all(boxes)
        close_s = time.perf_counter() - close_started
    per_box = (before - after) / n
    capacity = int(CAPACITY_RAM / per_box) if per_box > 0 else 0
    report.details["hold"] = {
        "n": n,
        "held_paused": held,
        "create_and_pause_s": create_s,
        "close_s": close_s,
        "mem_available_before": before,
        "mem_available_after": after,
        "mb_per_sandbox_host": per_box / 1e6,
        "mb_per_sandbox_docker_stats": stats_sum / n / 1e6,
        "est_capacity_24gib": capacity,
        "pause_failures_retried": failures,
    }
    mb = per_box / (1 << 20)
    report.rows += [
        plain_row("paused sandboxes held at once", "", held, f"= {n}", held == n),
        plain_row("  pause failures (retried)", "", len(failures), "0", not failures),
        plain_row(f"create + pause {n} concurrently", "s", create_s),
        plain_row("  per sandbox (wall / n)", "ms", create_s / n * 1e3),
        plain_row("host memory per paused sandbox", "MiB", mb, "~8 MiB (DESIGN)"),
        plain_row("  docker stats per sandbox", "MiB", stats_sum / n / (1 << 20)),
        plain_row("est. capacity in 24 GiB (memory)", "", capacity, "≥ 1000", capacity >= 1000),
        plain_row(f"close {n} paused", "s", close_s),
    ]


# -- 6. fork vs redoing the setup ------------------------------------------------------------


async def run_setup(box: Sandbox) -> None:
    """The expensive setup, checked."""
    result = await box.exec(SETUP, timeout=600)
    if result.exit_code != 0:
        raise RuntimeError(f"setup failed ({result.exit_code}): {result.stderr[-2000:]}")


async def check_setup(box: Sandbox) -> None:
    """The setup's output is present: the marker file and 200 compiled modules."""
    result = await box.exec(CHECK_SETUP)
    if result.exit_code != 0 or result.stdout.strip() != "200":
        raise RuntimeError(f"sandbox {box.id[:12]} lacks the setup: {result.stdout!r}")


async def setup_fresh(boxes: list[Sandbox]) -> None:
    """Baseline for one sandbox: create it and run the setup in it."""
    box = await DockerSandbox.create(spec())
    boxes.append(box)
    await run_setup(box)
    await check_setup(box)


async def redo_setup(n: int) -> float:
    """Seconds to get ``n`` sandboxes set up by running the setup in each, concurrently."""
    boxes: list[Sandbox] = []
    try:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(setup_fresh, boxes)
        return time.perf_counter() - started
    finally:
        await close_all(boxes)


async def fork_setup(n: int) -> dict[str, float]:
    """Set up one sandbox, snapshot it and fork ``n``; the phases' durations in seconds."""
    snap: Snapshot | None = None
    forks: list[Sandbox] = []
    try:
        started = time.perf_counter()
        async with sandbox(spec()) as source:
            await run_setup(source)
            set_up = time.perf_counter()
            snap = await source.snapshot()
        snapped = time.perf_counter()
        forks = await fork(snap, n)
        async with anyio.create_task_group() as tg:
            for box in forks:
                tg.start_soon(check_setup, box)
        done = time.perf_counter()
    finally:
        await close_all(forks)
        if snap is not None:
            with anyio.CancelScope(shield=True):
                await remove_snapshot(snap)
    return {
        "setup_once_s": set_up - started,
        "snapshot_s": snapped - set_up,
        "fork_and_check_s": done - snapped,
        "end_to_end_s": done - started,
    }


async def bench_fork(report: Report) -> None:
    """fork(snapshot, 8) vs creating 8 sandboxes and running the setup in each."""
    step(f"fork n={FORK_N} vs redoing the setup {FORK_N} times (concurrently)")
    baseline = await redo_setup(FORK_N)
    phases = await fork_setup(FORK_N)
    report.details["fork"] = {"redo_setup_s": baseline, **phases}
    fork_only = phases["fork_and_check_s"]
    end_to_end = phases["end_to_end_s"]
    report.rows += [
        faster_row(f"fork {FORK_N} from snapshot vs setup x {FORK_N}", "s", fork_only, baseline, 5),
        faster_row("  incl. setup once + snapshot", "s", end_to_end, baseline, 5),
        plain_row("  setup once (1 sandbox)", "s", phases["setup_once_s"]),
        plain_row("  snapshot (commit)", "s", phases["snapshot_s"]),
    ]


# -- output ----------------------------------------------------------------------------------


def show(report: Report) -> None:
    """The result table, with what the baselines are."""
    print_table(
        report,
        "sandbox",
        fmt,
        fmt_ratio,
        "baseline = raw docker-py in the same run (exec_run, containers.run + exec_run, "
        "pause/unpause); for CPU: the same sandbox unpaused; for fork: 8 fresh sandboxes "
        "each running the setup.",
    )


# -- main ------------------------------------------------------------------------------------


async def run_all(cfg: Config, raw_ids: set[str]) -> Report:
    """Every section of this benchmark, in order, on the engine's host."""
    engine = await get_engine()
    raw = RawContainers(engine.client)
    raw.ids = raw_ids  # shared, so that the final sweep knows them even after a crash
    report = await start_report(engine)
    await run_sections(
        report,
        [
            ("exec", lambda: bench_exec(cfg, raw, report)),
            ("create", lambda: bench_create(cfg, raw, report)),
            ("pause", lambda: bench_pause(cfg, raw, report)),
            ("cpu", lambda: bench_cpu(report)),
            ("hold", lambda: bench_hold(cfg, engine, report)),
            ("fork", lambda: bench_fork(report)),
        ],
    )
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    cfg = Config.from_args(argv)
    raw_ids: set[str] = set()
    return run_benchmark(cfg, lambda: run_all(cfg, raw_ids), show, raw_ids)


if __name__ == "__main__":
    sys.exit(main())
