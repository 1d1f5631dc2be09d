"""Paused sandboxes held at once (issue 14): host memory per paused sandbox, and what it is
made of, measured from the host.

N sandboxes (``--sandboxes``, 1000 by default) are made through the public API
(:func:`agentenv.sandbox.create`, the default hardened :class:`SandboxSpec` with the fast
executor), concurrently in a bounded task group (the engine paces the creations themselves
with its own limiter); each runs ``true`` once, then all are paused (``Sandbox.pause``:
the cgroup freezer, written from this host where it may) and held.

Memory is read from the host, never from inside a sandbox, once before anything is created
(the baseline, in the same run) and once while all N are held paused:

- per process, ``Pss`` and ``Rss`` from ``/proc/PID/smaps_rollup`` (PSS divides each shared
  page among the processes mapping it, so PSS sums to what they cost together): each
  sandbox's ``containerd-shim``, and the processes in its cgroup by role: the executor
  (``python3``), the init (``docker-init``), the keep-alive (``sh`` and ``sleep``);
- the growth of ``dockerd``, ``containerd`` and this benchmark's own process (the host
  side's sockets and objects) between the baseline and the hold;
- the kernel, host wide, from ``/proc/meminfo``'s growth: slab, kernel stacks, page tables,
  per-CPU; and the page cache (``Cached``, with ``Shmem``);
- the containers' memory cgroups (usage, and of it anon, cache and kernel memory): what the
  kernel charges to the sandboxes themselves. It overlaps the in-container processes' PSS
  and the kernel line, so it is shown beside the sum, not in it;
- ``MemAvailable``'s drop: the total, which the parts should explain.

Per-sandbox figures are totals divided by the number held. Times: create (and the first
``true``) per sandbox, as wall time over N and as each call's latency; pause latency
p50/p99 across the N, each paused on its own with the others held (then resume, likewise,
and all N paused at once, whose latencies include waiting for the others' pauses); the time
to close them all. The host is not ours alone (other work on
it moves ``MemAvailable``), so the unexplained remainder is shown too.

Usage: ``.venv/bin/python bench/hold.py [--sandboxes N] [--quick] [--concurrency 16]
[--settle 10] [--json PATH]``.

Everything created carries the labels ``agentenv-bench.run=<run id>`` and
``agentenv.run=<run id>``; it is closed when the run ends, however it ends, and whatever is
still there is then removed by that label. The run checks that nothing is left.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import docker
from common import (
    GIB,
    RUN_ID,
    Report,
    arg_parser,
    console,
    describe,
    fmt,
    fmt_ratio,
    plain_row,
    print_table,
    relative_row,
    run_benchmark,
    spec,
    start_report,
    step,
    summary,
)
from rich.table import Table

from agentenv.sandbox import Sandbox, cgroup, create
from agentenv.sandbox import labels as agentenv_labels
from agentenv.sandbox.docker import Engine, get_engine

MIB = 1 << 20
PROC = Path("/proc")
CGROUP = Path("/sys/fs/cgroup")
TOO_MANY_FAILURES = 10  # creation failures after which we stop creating and hold what we have
ROLLUP_KEYS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem")
MEMINFO_KEYS = (
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Cached",
    "Shmem",
    "AnonPages",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "PageTables",
    "Percpu",
)
KERNEL_KEYS = ("Slab", "KernelStack", "PageTables", "Percpu")
ROLES = ("containerd-shim", "executor", "init", "keep-alive", "other in-container")


@dataclass(frozen=True)
class Config:
    """How many sandboxes, how many made at once, and how long to let memory settle."""

    sandboxes: int
    concurrency: int
    settle_s: float
    json_path: Path | None

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Config:
        """Parse the command line."""
        parser = arg_parser(__doc__)
        parser.add_argument(
            "--sandboxes", type=int, default=None, help="sandboxes to hold (1000; 50 if --quick)"
        )
        parser.add_argument(
            "--concurrency", type=int, default=16, help="sandboxes being made at once (16)"
        )
        parser.add_argument(
            "--settle", type=float, default=10.0, help="seconds held before measuring (10)"
        )
        args = parser.parse_args(argv)
        n = args.sandboxes if args.sandboxes is not None else (50 if args.quick else 1000)
        if n < 1 or args.concurrency < 1:
            parser.error("--sandboxes and --concurrency must be at least 1")
        return cls(
            sandboxes=n, concurrency=args.concurrency, settle_s=args.settle, json_path=args.json
        )


# -- reading the host ------------------------------------------------------------------------


def meminfo() -> dict[str, int]:
    """``/proc/meminfo``'s fields that we use, in bytes."""
    found: dict[str, int] = {}
    for line in (PROC / "meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in MEMINFO_KEYS:
            found[key] = int(rest.split()[0]) * 1024
    return found


def rollup(pid: int) -> dict[str, int] | None:
    """A process's ``smaps_rollup`` (bytes), or ``None`` if it is gone."""
    found = dict.fromkeys(ROLLUP_KEYS, 0)
    try:
        text = (PROC / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in found:
            found[key] = int(rest.split()[0]) * 1024
    return found


def argv_of(pid: int) -> list[str]:
    """A process's command line (empty if it is gone or a kernel thread)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def status_field(pid: int, key: str) -> int:
    """A number from ``/proc/PID/status`` (``Threads``, say); 0 if it is gone."""
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def fd_count(pid: int) -> int:
    """Open file descriptors of a process; 0 if it is gone."""
    try:
        return len(os.listdir(PROC / str(pid) / "fd"))
    except OSError:
        return 0


def comm_of(pid: str) -> str:
    """A process's short name; empty if it is gone."""
    try:
        return (PROC / pid / "comm").read_text().strip()
    except OSError:
        return ""


def daemons() -> dict[str, int]:
    """The pids of ``dockerd`` and ``containerd`` (the first of each name)."""
    found: dict[str, int] = {}
    for entry in os.listdir(PROC):
        if entry.isdigit():
            name = comm_of(entry)
            if name in ("dockerd", "containerd") and name not in found:
                found[name] = int(entry)
    return found


def shims() -> dict[str, int]:
    """Container id -> pid of its ``containerd-shim`` (every container on the host)."""
    found: dict[str, int] = {}
    for entry in os.listdir(PROC):
        if entry.isdigit() and comm_of(entry).startswith("containerd-shim"):
            argv = argv_of(int(entry))
            if "-id" in argv[:-1]:
                found[argv[argv.index("-id") + 1]] = int(entry)
    return found


def cgroup_dir(controller: str, container_id: str) -> Path | None:
    """A container's cgroup folder for ``controller`` (cgroup v1), or its unified one (v2),
    under Docker's cgroupfs or systemd driver."""
    for place in (f"docker/{container_id}", f"system.slice/docker-{container_id}.scope"):
        for folder in (CGROUP / controller / place, CGROUP / place):
            if (folder / "cgroup.procs").is_file():
                return folder
    return None


def container_pids(container_id: str) -> list[int]:
    """The processes in a container's cgroup."""
    folder = cgroup_dir("memory", container_id) or cgroup_dir("pids", container_id)
    if folder is None:
        return []
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def memcg(container_id: str) -> dict[str, int]:
    """What the kernel charges to a container's memory cgroup, in bytes: ``usage`` and, of
    it, ``anon``, ``cache`` (file pages) and ``kernel`` (v1 ``memory.kmem.usage_in_bytes``,
    v2 ``kernel``)."""
    folder = cgroup_dir("memory", container_id)
    if folder is None:
        return {}

    def read(name: str) -> int:
        try:
            return int((folder / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    stat: dict[str, int] = {}
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            stat[key] = int(value)
    except (OSError, ValueError):
        pass
    if (folder / "memory.usage_in_bytes").exists():  # v1
        return {
            "usage": read("memory.usage_in_bytes"),
            "anon": stat.get("rss", 0),
            "cache": stat.get("cache", 0),
            "kernel": read("memory.kmem.usage_in_bytes"),
        }
    return {
        "usage": read("memory.current"),
        "anon": stat.get("anon", 0),
        "cache": stat.get("file", 0),
        "kernel": stat.get("kernel", 0),
    }


def role(argv: list[str]) -> str:
    """Which of our processes in a sandbox this is, from its command line."""
    exe = os.path.basename(argv[0]) if argv else ""
    if exe.startswith("python") and "-I" in argv:
        return "executor"
    if exe in ("docker-init", "tini", "catatonit"):
        return "init"
    if exe == "sleep" or (exe == "sh" and any("trap" in a for a in argv)):
        return "keep-alive"
    return "other in-container"


@dataclass
class Usage:
    """Memory of a set of processes, summed (bytes)."""

    procs: int = 0
    pss: int = 0
    rss: int = 0
    pss_anon: int = 0
    threads: int = 0

    def add(self, pid: int) -> None:
        found = rollup(pid)
        if found is None:
            return
        self.procs += 1
        self.pss += found["Pss"]
        self.rss += found["Rss"]
        self.pss_anon += found["Pss_Anon"]
        self.threads += status_field(pid, "Threads")


@dataclass
class HostSample:
    """Everything read from the host at one moment."""

    meminfo: dict[str, int]
    daemons: dict[str, Usage]
    daemon_fds: dict[str, int]
    roles: dict[str, Usage] = field(default_factory=dict)
    memcg: dict[str, int] = field(default_factory=dict)
    executors_per_sandbox: dict[int, int] = field(default_factory=dict)
    missing_shims: int = 0
    tasks_on_host: int = 0


def sample_host(container_ids: Iterable[str]) -> HostSample:
    """Read the host: meminfo, the daemons and this process, and for each given container
    its shim, its processes by role and its memory cgroup. Blocking."""
    pids = {**daemons(), "this benchmark": os.getpid()}
    usage = {name: Usage() for name in pids}
    for name, pid in pids.items():
        usage[name].add(pid)
    sample = HostSample(
        meminfo=meminfo(),
        daemons=usage,
        daemon_fds={name: fd_count(pid) for name, pid in pids.items()},
        tasks_on_host=int((PROC / "loadavg").read_text().split()[3].split("/")[1]),
    )
    ids = list(container_ids)
    if not ids:
        return sample
    sample.roles = {r: Usage() for r in ROLES}
    shim_of = shims()
    executors: Counter[int] = Counter()
    memcg_total: Counter[str] = Counter()
    for cid in ids:
        shim = shim_of.get(cid)
        if shim is None:
            sample.missing_shims += 1
        else:
            sample.roles["containerd-shim"].add(shim)
        n_exec = 0
        for pid in container_pids(cid):
            which = role(argv_of(pid))
            n_exec += which == "executor"
            sample.roles[which].add(pid)
        executors[n_exec] += 1
        memcg_total.update(memcg(cid))
    sample.memcg = dict(memcg_total)
    sample.executors_per_sandbox = dict(sorted(executors.items()))
    return sample


def frozen_count(container_ids: Iterable[str]) -> int:
    """How many of the containers the kernel says are frozen (read from their cgroups)."""
    count = 0
    for cid in container_ids:
        path = cgroup.freezer(cid)
        if path is not None and cgroup.is_frozen(path):
            count += 1
    return count


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Held:
    """The sandboxes being held, and what making, pausing and closing them took."""

    boxes: list[Sandbox] = field(default_factory=list)
    create_s: list[float] = field(default_factory=list)  # create(), per sandbox
    first_exec_s: list[float] = field(default_factory=list)  # exec("true"), per sandbox
    pause_s: list[float] = field(default_factory=list)  # one at a time
    resume_s: list[float] = field(default_factory=list)  # one at a time
    pause_at_once_s: list[float] = field(default_factory=list)  # all N at once
    failures: list[str] = field(default_factory=list)
    create_wall_s: float = 0.0
    pause_wall_s: float = 0.0
    pause_at_once_wall_s: float = 0.0
    close_wall_s: float = 0.0


async def make_all(cfg: Config, held: Held) -> None:
    """Create ``cfg.sandboxes`` sandboxes, ``cfg.concurrency`` at a time, each running
    ``true`` once. Stops early (holding what it has) after too many failures."""
    limit = anyio.CapacityLimiter(cfg.concurrency)
    box_spec = spec(executor="fast")  # the default hardened spec; fail loudly without python3
    step_every = max(1, cfg.sandboxes // 10)

    async def one(scope: anyio.CancelScope) -> None:
        async with limit:
            try:
                started = time.perf_counter()
                box = await create(box_spec)
                held.boxes.append(box)
                made = time.perf_counter()
                result = await box.exec("true", timeout=60)
                held.create_s.append(made - started)
                held.first_exec_s.append(time.perf_counter() - made)
                if result.exit_code != 0:
                    raise RuntimeError(f"`true` exited {result.exit_code}: {result.stderr}")
            except Exception as e:
                held.failures.append(
                    f"create #{len(held.boxes) + len(held.failures)}: {describe(e)}"
                )
                console.print(f"[red]{held.failures[-1]}[/red]")
                if len(held.failures) >= TOO_MANY_FAILURES:
                    scope.cancel()
                return
        if len(held.create_s) % step_every == 0:
            step(f"  {len(held.create_s)} made")

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(cfg.sandboxes):
            tg.start_soon(one, tg.cancel_scope)
    held.create_wall_s = time.perf_counter() - started


async def pause_all(held: Held) -> None:
    """Pause every sandbox, one after another, each pause timed on its own (its cost, with
    the others held); then resume each (timed) and pause them all at once, as N agents all
    waiting on the model (each then also waits for the others' pauses: one event loop)."""

    async def one(box: Sandbox, into: list[float], op: str = "pause") -> None:
        started = time.perf_counter()
        try:
            await (box.pause() if op == "pause" else box.resume())
        except Exception as e:
            held.failures.append(f"{op} {box.id[:12]}: {describe(e)}")
            return
        into.append(time.perf_counter() - started)

    started = time.perf_counter()
    for box in held.boxes:
        await one(box, held.pause_s)
    held.pause_wall_s = time.perf_counter() - started
    for box in held.boxes:
        await one(box, held.resume_s, "resume")
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for box in held.boxes:
            tg.start_soon(one, box, held.pause_at_once_s)
    held.pause_at_once_wall_s = time.perf_counter() - started


async def close_all(held: Held) -> None:
    """Close every sandbox concurrently (the engine paces its removals), even while being
    cancelled."""
    started = time.perf_counter()
    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            for box in held.boxes:
                tg.start_soon(box.close)
    held.close_wall_s = time.perf_counter() - started


def ours_left(engine: Engine) -> int:
    """Containers still labelled ``agentenv.run=<this run>`` (``docker ps -a --filter``)."""
    found = engine.api.containers(all=True, filters={"label": f"{agentenv_labels.RUN}={RUN_ID}"})
    return len(found)


async def bench_hold(cfg: Config, engine: Engine, report: Report) -> None:
    """Create, pause and hold; measure the host before and while held; close."""
    n = cfg.sandboxes
    held = Held()
    step("baseline: the host before anything is created")
    await anyio.sleep(2)
    before = await anyio.to_thread.run_sync(sample_host, ())
    after_close: dict[str, int] = {}
    during: HostSample | None = None
    frozen = 0
    try:
        step(f"creating {n} sandboxes ({cfg.concurrency} at a time), `true` in each")
        await make_all(cfg, held)
        step(f"  {len(held.boxes)} made in {held.create_wall_s:.1f} s; pausing them all")
        await pause_all(held)
        step(
            f"  paused one by one in {held.pause_wall_s:.2f} s, then resumed and paused all at "
            f"once in {held.pause_at_once_wall_s:.2f} s; holding {cfg.settle_s:g} s to settle"
        )
        await anyio.sleep(cfg.settle_s)
        ids = [box.id for box in held.boxes]
        frozen = await anyio.to_thread.run_sync(frozen_count, ids)
        during = await anyio.to_thread.run_sync(sample_host, ids)
        step(f"  measured: {frozen} of {len(ids)} frozen (read from their cgroups)")
    finally:
        step(f"closing {len(held.boxes)} sandboxes")
        await close_all(held)
        step(f"  closed in {held.close_wall_s:.1f} s")
    left = await anyio.to_thread.run_sync(ours_left, engine)
    await anyio.sleep(2)
    after_close = await anyio.to_thread.run_sync(meminfo)
    report.errors += held.failures
    if during is None:
        return
    record(cfg, report, held, before, during, after_close, frozen, left)


# -- the figures -----------------------------------------------------------------------------


def breakdown(before: HostSample, during: HostSample) -> list[tuple[str, int, int, int, int]]:
    """(component, processes, PSS, RSS, anon PSS) in bytes: our processes per role, the
    daemons' growth, the kernel's growth, the page cache's growth."""
    rows: list[tuple[str, int, int, int, int]] = []
    for name in ROLES:
        u = during.roles[name]
        rows.append((name, u.procs, u.pss, u.rss, u.pss_anon))
    for name, u in during.daemons.items():
        b = before.daemons.get(name, Usage())
        rows.append(
            (f"{name} growth", u.procs, u.pss - b.pss, u.rss - b.rss, u.pss_anon - b.pss_anon)
        )
    grew = {k: during.meminfo[k] - before.meminfo[k] for k in MEMINFO_KEYS}
    kernel = sum(grew[k] for k in KERNEL_KEYS)
    rows.append(("kernel: slab+kstack+pagetables+percpu", 0, kernel, kernel, 0))
    rows.append(("page cache (Cached, incl. Shmem)", 0, grew["Cached"], grew["Cached"], 0))
    return rows


def record(
    cfg: Config,
    report: Report,
    held: Held,
    before: HostSample,
    during: HostSample,
    after_close: dict[str, int],
    frozen: int,
    left: int,
) -> None:
    """The table rows and the JSON details."""
    n = len(held.boxes)
    parts = breakdown(before, during)
    parts_sum = sum(p[2] for p in parts)
    drop = before.meminfo["MemAvailable"] - during.meminfo["MemAvailable"]
    per_box = drop / n
    capacity = int(before.meminfo["MemAvailable"] / per_box) if per_box > 0 else 0
    grew = {k: during.meminfo[k] - before.meminfo[k] for k in MEMINFO_KEYS}
    not_back = before.meminfo["MemAvailable"] - after_close["MemAvailable"]
    report.details["hold"] = {
        "requested": cfg.sandboxes,
        "held": n,
        "paused": len(held.pause_at_once_s),
        "frozen_per_cgroup": frozen,
        "left_after_close": left,
        "create_wall_s": held.create_wall_s,
        "create": summary(held.create_s) if held.create_s else {},
        "first_exec": summary(held.first_exec_s) if held.first_exec_s else {},
        "pause_wall_s": held.pause_wall_s,
        "pause": summary(held.pause_s) if held.pause_s else {},
        "resume": summary(held.resume_s) if held.resume_s else {},
        "pause_at_once_wall_s": held.pause_at_once_wall_s,
        "pause_at_once": summary(held.pause_at_once_s) if held.pause_at_once_s else {},
        "close_wall_s": held.close_wall_s,
        "components_bytes": {
            name: {"procs": procs, "pss": pss, "rss": rss, "pss_anon": anon}
            for name, procs, pss, rss, anon in parts
        },
        "components_sum_pss_bytes": parts_sum,
        "mem_available_drop_bytes": drop,
        "meminfo_before": before.meminfo,
        "meminfo_held": during.meminfo,
        "meminfo_growth": grew,
        "meminfo_after_close": after_close,
        "mem_available_not_back_after_close_bytes": not_back,
        "memcg_total_bytes": during.memcg,
        "executors_per_sandbox": {str(k): v for k, v in during.executors_per_sandbox.items()},
        "threads": {name: u.threads for name, u in during.roles.items()},
        "daemon_threads": {
            name: [before.daemons[name].threads, u.threads] for name, u in during.daemons.items()
        },
        "daemon_fds": {
            name: [before.daemon_fds.get(name, 0), fds] for name, fds in during.daemon_fds.items()
        },
        "tasks_on_host": [before.tasks_on_host, during.tasks_on_host],
        "missing_shims": during.missing_shims,
        "est_capacity_from_available": capacity,
    }
    target = "≥ 1000" if cfg.sandboxes >= 1000 else f"= {cfg.sandboxes}"
    rows = [
        plain_row("paused sandboxes held at once", "", n, target, n >= min(cfg.sandboxes, 1000)),
        plain_row("  frozen (read from their cgroups)", "", frozen, f"= {n}", frozen == n),
        plain_row("  executors per sandbox (max)", "", max(during.executors_per_sandbox or {0: 0})),
        plain_row(f"create + `true` {n} (wall)", "s", held.create_wall_s),
        plain_row("  per sandbox (wall / n)", "ms", held.create_wall_s / n * 1e3),
    ]
    if held.create_s:
        create = summary(held.create_s)
        first = summary(held.first_exec_s)
        rows += [
            plain_row("  create() latency p50", "ms", create["p50_ms"]),
            plain_row("  create() latency p99", "ms", create["p99_ms"]),
            plain_row("  first `true` p50", "ms", first["p50_ms"]),
        ]
    if held.pause_s and held.resume_s and held.pause_at_once_s:
        pause, resume = summary(held.pause_s), summary(held.resume_s)
        at_once = summary(held.pause_at_once_s)
        rows += [
            plain_row(
                f"pause, one at a time ({n} held): p50",
                "ms",
                pause["p50_ms"],
                "≤ 15 ms",
                pause["p50_ms"] <= 15,
            ),
            plain_row("  p99", "ms", pause["p99_ms"], "≤ 50 ms", pause["p99_ms"] <= 50),
            plain_row(
                "resume, one at a time: p50",
                "ms",
                resume["p50_ms"],
                "≤ 15 ms",
                resume["p50_ms"] <= 15,
            ),
            plain_row("  p99", "ms", resume["p99_ms"], "≤ 50 ms", resume["p99_ms"] <= 50),
            plain_row(f"pause, all {n} at once: p50 (incl. queueing)", "ms", at_once["p50_ms"]),
            plain_row("  p99", "ms", at_once["p99_ms"]),
            plain_row("  all (wall)", "ms", held.pause_at_once_wall_s * 1e3),
        ]
    rows += [
        plain_row(f"close {n} paused (wall)", "s", held.close_wall_s),
        plain_row("  per sandbox (wall / n)", "ms", held.close_wall_s / n * 1e3),
        plain_row("  containers left (agentenv.run label)", "", left, "0", left == 0),
        relative_row(
            "MemAvailable held vs before",
            "GiB",
            during.meminfo["MemAvailable"] / GIB,
            before.meminfo["MemAvailable"] / GIB,
            "x of before",
        ),
        plain_row("host memory per paused sandbox", "MiB", per_box / MIB, "~8 MiB (DESIGN)"),
        plain_row("  sum of the parts per sandbox", "MiB", parts_sum / n / MIB),
        plain_row(
            "est. capacity (MemAvailable before / per box)",
            "",
            capacity,
            "≥ 1000",
            capacity >= 1000,
        ),
        plain_row("MemAvailable not back after close", "MiB", not_back / MIB),
    ]
    for name, u in during.daemons.items():
        b = before.daemons[name]
        rows.append(
            relative_row(
                f"{name} RSS held vs before", "MiB", u.rss / MIB, b.rss / MIB, "x of before"
            )
        )
    report.rows += rows


# -- output ----------------------------------------------------------------------------------


def show_breakdown(report: Report) -> None:
    """Host memory per paused sandbox by component, PSS and RSS, totals and per sandbox."""
    hold = report.details.get("hold")
    if not hold or not hold.get("components_bytes"):
        return
    n = hold["held"]
    table = Table(
        title=f"host memory of {n} paused sandboxes, by component (run {RUN_ID}; growth = held "
        "minus the baseline before creation)",
        title_justify="left",
    )
    for column in (
        "component",
        "procs",
        "PSS total",
        "RSS total",
        "PSS / box",
        "RSS / box",
        "anon PSS / box",
    ):
        table.add_column(column, justify="left" if column == "component" else "right")

    def mib(value: float) -> str:
        return f"{value / MIB:,.2f}"

    for name, c in hold["components_bytes"].items():
        table.add_row(
            name,
            str(c["procs"] or ""),
            mib(c["pss"]),
            mib(c["rss"]),
            mib(c["pss"] / n),
            mib(c["rss"] / n),
            mib(c["pss_anon"] / n),
        )
    total = hold["components_sum_pss_bytes"]
    drop = hold["mem_available_drop_bytes"]
    table.add_row("[bold]sum of the parts (PSS)[/bold]", "", mib(total), "", mib(total / n), "", "")
    table.add_row("[bold]MemAvailable drop[/bold]", "", mib(drop), "", mib(drop / n), "", "")
    table.add_row(
        "  unexplained (other users of the host, noise)",
        "",
        mib(drop - total),
        "",
        mib((drop - total) / n),
        "",
        "",
    )
    cg = hold["memcg_total_bytes"]
    if cg:
        table.add_row(
            "(overlaps) containers' memory cgroups: usage",
            "",
            mib(cg["usage"]),
            "",
            mib(cg["usage"] / n),
            "",
            "",
        )
        for key in ("anon", "cache", "kernel"):
            table.add_row(
                f"(overlaps)   of which {key}", "", mib(cg[key]), "", mib(cg[key] / n), "", ""
            )
    console.print(table)
    grew = hold["meminfo_growth"]
    console.print(
        "meminfo growth per sandbox (KiB): "
        + ", ".join(f"{k} {grew[k] / n / 1024:,.0f}" for k in MEMINFO_KEYS if k != "MemTotal")
    )
    console.print(
        f"executors per sandbox: {hold['executors_per_sandbox']}; threads: {hold['threads']}; "
        f"daemon fds before/held: {hold['daemon_fds']}; tasks on host before/held: "
        f"{hold['tasks_on_host']}"
    )


def show(report: Report) -> None:
    """The breakdown, then the result table."""
    show_breakdown(report)
    print_table(
        report,
        "hold",
        fmt,
        fmt_ratio,
        "baseline = the host before any sandbox of this run was created; PSS/RSS from "
        "/proc/PID/smaps_rollup, kernel and page cache from /proc/meminfo, all read from the "
        "host. The host is shared: MemAvailable moves with other work on it.",
    )


# -- main ------------------------------------------------------------------------------------


async def run_all(cfg: Config) -> Report:
    """The hold, on the engine's host."""
    engine = await get_engine()
    report = await start_report(engine)
    try:
        await bench_hold(cfg, engine, report)
    except Exception as e:
        report.errors.append(f"hold: {describe(e)}")
        console.print(f"[red]hold failed: {describe(e)}[/red]")
    return report


def check_nothing_left() -> int:
    """After the final sweep: containers of this run still there (should be 0)."""
    client = docker.from_env(version="auto")
    try:
        label = f"{agentenv_labels.RUN}={RUN_ID}"
        left = len(client.api.containers(all=True, filters={"label": label}))
    finally:
        client.close()
    colour = "green" if left == 0 else "red"
    console.print(f"[{colour}]docker ps -a --filter label={label}: {left} left[/{colour}]")
    return left


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the tables."""
    cfg = Config.from_args(argv)
    # Sandboxes carry agentenv's run id too: make it ours (``run_id`` is cached: forget any
    # value taken before), so that `docker ps --filter label=agentenv.run=<run id>` finds them.
    os.environ["AGENTENV_RUN_ID"] = RUN_ID
    agentenv_labels.run_id.cache_clear()
    if agentenv_labels.run_id() != RUN_ID:
        raise RuntimeError("could not set agentenv's run id")
    status = run_benchmark(cfg, lambda: run_all(cfg), show)
    left = check_nothing_left()
    return status or (1 if left else 0)


if __name__ == "__main__":
    sys.exit(main())
