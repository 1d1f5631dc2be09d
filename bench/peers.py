"""Peers benchmark: agentenv against SWE-ReX (SWE-agent's sandbox runtime) and raw docker-py,
measured in one run, printed as agentenv's figure over the peer's (below 1: agentenv is
faster).

1. exec of ``true`` on a running sandbox against SWE-ReX's in-container server
   (``swerex-remote``, reached over HTTP on a port published on 127.0.0.1) driven by its
   ``RemoteRuntime`` (target: agentenv at least 2.5x faster): ``sb.exec("true")`` against
   ``execute(Command("true", shell=True))``, and ``sb.exec(["true"])`` against
   ``execute(Command(["true"]))``: both spawn the same way, except that agentenv's shell is
   bash where SWE-ReX's is ``/bin/sh`` (dash here). For reference: SWE-ReX's bash session
   (``run_in_session(BashAction("true"))``) and raw ``exec_run``. The kinds take turns,
   20 samples at a time.
2. create -> first command, cold: ``create()`` + ``exec(["true"])`` against
   ``containers.run`` + ``exec_run`` (bench/sandbox.py's pieces; target ≤ 1.2x), and for
   reference against SWE-ReX's ``DockerDeployment.start()`` + ``execute`` (as shipped: the
   ``docker run`` CLI, then polling the server every 0.25 s) and against the same server
   started with docker-py and polled every 10 ms (what SWE-ReX's design costs without that
   polling).
3. N (32) concurrent create -> exec ``true`` -> remove, a few rounds: agentenv in one task
   group against docker-py in N threads (target ≤ 1.0x on the round's wall time).

SWE-ReX's image is built offline, once: the wheels of the host's swe-rex version are
downloaded with pip for the base image's Python, installed into a venv in an image built
``FROM agentenv/base:bookworm`` without network, and tagged
``agentenv-bench/swerex:<version>``; it is kept for the next run (``--rebuild`` makes it
again; ``docker rmi`` it to get rid of it).

Usage: ``.venv/bin/python bench/peers.py [--quick] [--concurrent N] [--rounds R]
[--rebuild] [--json PATH]``; needs swe-rex on the host (``.venv/bin/pip install swe-rex``).

Everything the run creates carries the label ``agentenv-bench.run=<run id>`` (SWE-ReX's
containers too, through ``docker_args``); whatever is still there when the run ends (error,
Ctrl-C) is removed by that label, and only by it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import anyio
import docker
import docker.errors
from common import (
    BENCH_LABEL,
    IMAGE,
    LABELS,
    RUN_ID,
    Report,
    Row,
    arg_parser,
    check_ok,
    fmt,
    fmt_ratio,
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
from sandbox import (
    WARMUP,
    RawContainers,
    box_exec_true,
    cold_start_box,
    cold_start_raw,
    raw_exec_true,
    timed,
    timed_blocking,
)

try:
    from swerex.deployment.docker import DockerDeployment
    from swerex.runtime.abstract import BashAction, Command, CreateBashSessionRequest
    from swerex.runtime.remote import RemoteRuntime
except ImportError:  # a peer's package: not one of agentenv's dependencies
    sys.exit("bench/peers.py needs SWE-ReX on the host: .venv/bin/pip install swe-rex")

from agentenv.sandbox import Sandbox, create
from agentenv.sandbox.docker import get_engine

SWEREX_VERSION = importlib.metadata.version("swe-rex")
SWEREX_IMAGE = f"agentenv-bench/swerex:{SWEREX_VERSION}"
SWEREX_PORT = 8000  # where swerex-remote listens inside its container (its default)
LOCALHOST = "http://127.0.0.1"
RATIO = "x"  # agentenv / peer
EXEC_SPEEDUP = 2.5
EXEC_BLOCK = 20  # exec samples of one kind in a row
COLD_MAX = 1.2
CONCURRENT_MAX = 1.0

Timed = Callable[[], Awaitable[float]]  # an operation that says how many seconds it took


def quiet_swerex_logs() -> None:
    """Only warnings from SWE-ReX's loggers (it prints DEBUG and INFO lines by default: a
    free port found, a container started): a logger that already has a handler when SWE-ReX
    first asks for it is left as it is."""
    for name in ("free_port", "rex-deploy", "rex-runtime"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.WARNING)
        logger.addHandler(logging.StreamHandler())
        logger.propagate = False


# Installed into a venv of its own (the base image has neither pip nor ensurepip: pip runs
# from its wheel), so the image's Python stays as the base image has it.
DOCKERFILE = """\
FROM {base}
COPY wheels /tmp/wheels
RUN set -e; pip_wheel=$(echo /tmp/wheels/pip-*.whl); \\
    python3 -m venv --without-pip /opt/swerex; \\
    /opt/swerex/bin/python "$pip_wheel/pip" install --no-index --no-cache-dir \\
        --disable-pip-version-check --find-links /tmp/wheels swe-rex=={version}; \\
    ln -s /opt/swerex/bin/swerex-remote /usr/local/bin/swerex-remote; \\
    rm -rf /tmp/wheels; \\
    swerex-remote --version
"""


# -- configuration and results ---------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How many samples each measurement takes."""

    exec_iters: int
    create_samples: int
    concurrent: int
    rounds: int
    rebuild: bool
    json_path: Path | None

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Config:
        """Parse the command line."""
        parser = arg_parser(__doc__)
        parser.add_argument("--concurrent", type=int, default=32, help="sandboxes at once (32)")
        parser.add_argument("--rounds", type=int, default=None, help="concurrent rounds (3)")
        parser.add_argument(
            "--rebuild", action="store_true", help=f"build {SWEREX_IMAGE} even if present"
        )
        args = parser.parse_args(argv)
        rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
        if args.concurrent < 1 or rounds < 1:
            parser.error("--concurrent and --rounds must be at least 1")
        return cls(
            exec_iters=30 if args.quick else 200,
            create_samples=3 if args.quick else 10,
            concurrent=args.concurrent,
            rounds=rounds,
            rebuild=args.rebuild,
            json_path=args.json,
        )


def p90(samples: list[float]) -> float:
    """The 90th percentile (interpolated within the samples)."""
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=10, method="inclusive")[8]


def stats(samples_s: list[float]) -> dict[str, float]:
    """``common.summary`` of samples in seconds, plus their p90 in milliseconds."""
    return {**summary(samples_s), "p90_ms": p90([s * 1e3 for s in samples_s])}


def pair_rows(
    what: str,
    ours: dict[str, float],
    theirs: dict[str, float],
    at_most: float | None = None,
) -> list[Row]:
    """p50 and p90 rows of agentenv over a peer; with ``at_most``, each is judged by it."""
    rows = []
    for q in ("p50", "p90"):
        mine, peer = ours[f"{q}_ms"], theirs[f"{q}_ms"]
        if at_most is None:
            rows.append(relative_row(f"{what} {q}", "ms", mine, peer, RATIO))
        else:
            target = f"≤ {at_most:.2f}" + (f" ({1 / at_most:g}x faster)" if at_most < 1 else "")
            rows.append(
                relative_row(f"{what} {q}", "ms", mine, peer, RATIO, target, mine / peer <= at_most)
            )
    return rows


# -- SWE-ReX's image -------------------------------------------------------------------------


def base_python(client: docker.DockerClient) -> tuple[str, str]:
    """The base image's Python version (``3.11``) and machine (``x86_64``)."""
    out = client.containers.run(
        IMAGE,
        ["python3", "-c", "import platform, sys; print(*sys.version_info[:2], platform.machine())"],
        remove=True,
        network_mode="none",
        labels=LABELS,
    )
    major, minor, machine = out.decode().split()
    return f"{major}.{minor}", machine


def download_wheels(dest: Path, python: str, machine: str) -> None:
    """swe-rex (the host's version), its dependencies and pip, as wheels for ``python`` on
    a glibc ``machine`` (the base image is Debian bookworm: glibc 2.36)."""
    abi = "cp" + python.replace(".", "")
    platforms = [f"manylinux{tag}_{machine}" for tag in ("2014", "_2_28", "_2_34")]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--abi",
        abi,
        *(arg for platform in platforms for arg in ("--platform", platform)),
        "-d",
        str(dest),
        f"swe-rex=={SWEREX_VERSION}",
        "pip",
    ]
    # pip's output (warnings about this host's configured indexes, ...) only if it failed
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip download failed ({done.returncode}): {done.stderr[-2000:]}")


def build_swerex_image(client: docker.DockerClient, rebuild: bool) -> str:
    """``SWEREX_IMAGE``, built now unless present (or ``rebuild``). Blocking."""
    if not rebuild:
        try:
            client.images.get(SWEREX_IMAGE)
            return SWEREX_IMAGE
        except docker.errors.ImageNotFound:
            pass
    python, machine = base_python(client)
    step(f"building {SWEREX_IMAGE} offline (Python {python}, {machine}); kept for next runs")
    with tempfile.TemporaryDirectory(prefix="swerex-image-") as tmp:
        context = Path(tmp)
        download_wheels(context / "wheels", python, machine)
        dockerfile = DOCKERFILE.format(base=IMAGE, version=SWEREX_VERSION)
        (context / "Dockerfile").write_text(dockerfile)
        client.images.build(
            path=str(context),
            tag=SWEREX_IMAGE,
            rm=True,
            forcerm=True,
            pull=False,
            network_mode="none",
            labels={"agentenv-bench.peer": "swe-rex"},  # not the run's label: kept
        )
    return SWEREX_IMAGE


# -- SWE-ReX's server ------------------------------------------------------------------------


def run_swerex_container(client: docker.DockerClient, ids: set[str], token: str) -> Container:
    """``swerex-remote`` in a new container, its port published on 127.0.0.1 (blocking)."""
    container = client.containers.run(
        SWEREX_IMAGE,
        ["swerex-remote", "--auth-token", token],
        detach=True,
        labels=LABELS,
        ports={f"{SWEREX_PORT}/tcp": ("127.0.0.1",)},  # a free host port, loopback only
    )
    ids.add(container.id)
    return container


def published_port(container: Container) -> int:
    """The host port the container's server is published on (blocking)."""
    container.reload()
    return int(container.ports[f"{SWEREX_PORT}/tcp"][0]["HostPort"])


async def wait_alive(runtime: RemoteRuntime, every: float = 0.01, timeout: float = 60) -> None:
    """Poll the server's ``/is_alive`` every ``every`` seconds until it answers."""
    with anyio.fail_after(timeout):
        while not await runtime.is_alive(timeout=1.0):
            await anyio.sleep(every)


async def start_swerex(
    client: docker.DockerClient, ids: set[str]
) -> tuple[Container, RemoteRuntime]:
    """A running SWE-ReX server and the runtime that drives it, the server answering."""
    token = uuid.uuid4().hex
    container = await anyio.to_thread.run_sync(run_swerex_container, client, ids, token)
    port = await anyio.to_thread.run_sync(published_port, container)
    runtime = RemoteRuntime(host=LOCALHOST, port=port, auth_token=token)
    await wait_alive(runtime)
    return container, runtime


async def remove_swerex(client: docker.DockerClient, ids: set[str], container: Container) -> None:
    """Remove a SWE-ReX container, even while being cancelled."""
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(remove_container, client, container.id)
        ids.discard(container.id)


def exit_code(code: int | None) -> int:
    """SWE-ReX's exit code, -1 when it reports none."""
    return -1 if code is None else code


async def swerex_execute(runtime: RemoteRuntime, cmd: str | list[str]) -> None:
    """``execute(Command(cmd))``, checked: a string through ``/bin/sh -c`` (``shell=True``),
    an argv without a shell."""
    response = await runtime.execute(Command(command=cmd, shell=isinstance(cmd, str)))
    check_ok(exit_code(response.exit_code), f"SWE-ReX execute({cmd!r})")


async def swerex_execute_true(runtime: RemoteRuntime) -> None:
    """``execute(Command("true", shell=True))``, checked."""
    await swerex_execute(runtime, "true")


async def swerex_session_true(runtime: RemoteRuntime) -> None:
    """``run_in_session(BashAction("true"))`` in the default session, checked."""
    observation = await runtime.run_in_session(BashAction(command="true", check="raise"))
    check_ok(exit_code(observation.exit_code), "SWE-ReX run_in_session('true')")


async def box_exec(box: Sandbox, cmd: str | list[str]) -> None:
    """``box.exec(cmd)``, checked: a string through the sandbox's shell, an argv without."""
    result = await box.exec(cmd)
    check_ok(result.exit_code, f"box.exec({cmd!r})")


# -- 1. exec round trip ----------------------------------------------------------------------


async def sample_blocks(ops: dict[str, Timed], n: int) -> dict[str, list[float]]:
    """``n`` timed samples of each op after a warm-up, taken in turns of ``EXEC_BLOCK``: a
    neighbour's burst lands on all of them alike, while what one op leaves behind (the
    engine tidying up an exec, a closed connection) lands on the next op once a turn only."""
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for op in ops.values():
        for _ in range(WARMUP):
            await op()
    for first in range(0, n, EXEC_BLOCK):
        for name, op in ops.items():
            for _ in range(min(EXEC_BLOCK, n - first)):
                samples[name].append(await op())
    return samples


async def bench_exec(cfg: Config, raw: RawContainers, report: Report) -> None:
    """exec ``true`` on running sandboxes: agentenv vs SWE-ReX's server (and ``exec_run``)."""
    n = cfg.exec_iters
    step(
        f"exec `true`: {n} each of agentenv and SWE-ReX execute, shell and argv; "
        f"SWE-ReX bash session; exec_run (in turns of {EXEC_BLOCK})"
    )
    client = raw.client
    box = await create(spec())
    try:
        container, runtime = await start_swerex(client, raw.ids)
        try:
            await runtime.create_session(CreateBashSessionRequest())
            async with raw.started() as plain:
                ops: dict[str, Timed] = {
                    "agentenv_shell": lambda: timed(lambda: box_exec(box, "true")),
                    "swerex_shell": lambda: timed(lambda: swerex_execute(runtime, "true")),
                    "agentenv_argv": lambda: timed(lambda: box_exec(box, ["true"])),
                    "swerex_argv": lambda: timed(lambda: swerex_execute(runtime, ["true"])),
                    "swerex_session": lambda: timed(lambda: swerex_session_true(runtime)),
                    "raw_exec_run": lambda: timed_blocking(lambda: raw_exec_true(plain)),
                }
                samples = await sample_blocks(ops, n)
        finally:
            await remove_swerex(client, raw.ids, container)
    finally:
        with anyio.CancelScope(shield=True):
            await box.close()

    s = {name: stats(values) for name, values in samples.items()}
    report.details["exec"] = {"agentenv_exec_mode": getattr(box, "exec_mode", "?"), **s}
    shell, argv = s["agentenv_shell"], s["agentenv_argv"]
    at_most = 1 / EXEC_SPEEDUP
    report.rows += [
        *pair_rows('exec("true") vs SWE-ReX execute, shell', shell, s["swerex_shell"], at_most),
        *pair_rows('exec(["true"]) vs SWE-ReX execute, argv', argv, s["swerex_argv"], at_most),
        *pair_rows('exec("true") vs SWE-ReX bash session', shell, s["swerex_session"]),
        *pair_rows('exec(["true"]) vs docker-py exec_run', argv, s["raw_exec_run"]),
    ]


# -- 2. create -> first command --------------------------------------------------------------


async def cold_start_deployment() -> float:
    """Seconds of SWE-ReX's ``DockerDeployment.start()`` (the image is local: never pulled)
    plus the first ``execute``; stopped (``docker kill`` of a ``--rm`` container) after."""
    deployment = DockerDeployment(
        image=SWEREX_IMAGE,
        pull="never",
        startup_timeout=60.0,
        docker_args=["--label", f"{BENCH_LABEL}={RUN_ID}"],
    )
    try:
        started = time.perf_counter()
        await deployment.start()  # type: ignore[no-untyped-call,unused-ignore]
        await swerex_execute_true(deployment.runtime)
        return time.perf_counter() - started
    finally:
        with anyio.CancelScope(shield=True):
            await deployment.stop()  # type: ignore[no-untyped-call,unused-ignore]


async def cold_start_server(raw: RawContainers) -> float:
    """Seconds from ``containers.run`` of SWE-ReX's server (polled every 10 ms) to the end
    of its first ``execute``."""
    started = time.perf_counter()
    container, runtime = await start_swerex(raw.client, raw.ids)
    try:
        await swerex_execute_true(runtime)
        return time.perf_counter() - started
    finally:
        await remove_swerex(raw.client, raw.ids, container)


async def bench_create(cfg: Config, raw: RawContainers, report: Report) -> None:
    """Cold create -> first command: agentenv, docker-py, SWE-ReX (two ways), interleaved."""
    n = cfg.create_samples
    step(f"create → first command, cold: {n} samples each, interleaved")
    ops: dict[str, Timed] = {
        "raw_run_exec_run": lambda: cold_start_raw(raw),
        "agentenv": cold_start_box,
        "swerex_deployment": cold_start_deployment,
        "swerex_server_10ms": lambda: cold_start_server(raw),
    }
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(n):
        for name, op in ops.items():
            samples[name].append(await op())

    s = {name: stats(values) for name, values in samples.items()}
    report.details["create"] = s
    ours = s["agentenv"]
    report.rows += [
        *pair_rows("create → first cmd vs docker-py", ours, s["raw_run_exec_run"], COLD_MAX),
        *pair_rows("create → first cmd vs SWE-ReX DockerDeployment", ours, s["swerex_deployment"]),
        *pair_rows("  vs SWE-ReX server, polled every 10 ms", ours, s["swerex_server_10ms"]),
    ]


# -- 3. concurrent create -> exec -> remove --------------------------------------------------


async def box_lifecycle(durations: list[float]) -> None:
    """One sandbox: create, ``exec(["true"])``, close; its duration goes to ``durations``."""
    started = time.perf_counter()
    box = await create(spec())
    try:
        await box_exec_true(box)
    finally:
        with anyio.CancelScope(shield=True):
            await box.close()
    durations.append(time.perf_counter() - started)


async def box_round(n: int, durations: list[float]) -> float:
    """Seconds for ``n`` sandbox lifecycles at once, in one task group."""
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(box_lifecycle, durations)
    return time.perf_counter() - started


def raw_lifecycle(raw: RawContainers) -> float:
    """One container: ``containers.run``, ``exec_run(["true"])``, forced removal; seconds
    (blocking)."""
    started = time.perf_counter()
    container = raw.run()
    try:
        raw_exec_true(container)
    finally:
        remove_container(raw.client, container.id)
        raw.ids.discard(container.id)
    return time.perf_counter() - started


def raw_round_blocking(raw: RawContainers, n: int, durations: list[float]) -> float:
    """Seconds for ``n`` container lifecycles at once, one thread each (blocking)."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="raw") as pool:
        durations.extend(pool.map(lambda _: raw_lifecycle(raw), range(n)))
    return time.perf_counter() - started


async def bench_concurrent(cfg: Config, raw_ids: set[str], report: Report) -> None:
    """``cfg.concurrent`` create -> exec -> remove at once: agentenv vs docker-py threads."""
    n, rounds = cfg.concurrent, cfg.rounds
    step(f"{n} concurrent create → exec `true` → remove: {rounds} round(s) each, alternating")
    # A connection per thread: docker-py's default pool (10) would make and drop the rest.
    client = docker.from_env(version="auto", max_pool_size=n)
    try:
        raw = RawContainers(client)
        raw.ids = raw_ids
        walls: dict[str, list[float]] = {"raw_threads": [], "agentenv": []}
        each: dict[str, list[float]] = {"raw_threads": [], "agentenv": []}
        for _ in range(rounds):
            walls["raw_threads"].append(
                await anyio.to_thread.run_sync(raw_round_blocking, raw, n, each["raw_threads"])
            )
            walls["agentenv"].append(await box_round(n, each["agentenv"]))
    finally:
        client.close()

    w = {name: stats(values) for name, values in walls.items()}
    e = {name: stats(values) for name, values in each.items()}
    report.details["concurrent"] = {"n": n, "rounds": rounds, "wall": w, "each": e}
    what = f"{n} at once, round wall vs docker-py threads"
    report.rows += [
        *pair_rows(what, w["agentenv"], w["raw_threads"], CONCURRENT_MAX),
        *pair_rows("  one lifecycle vs docker-py", e["agentenv"], e["raw_threads"]),
    ]


# -- output ----------------------------------------------------------------------------------


def show(report: Report) -> None:
    """The result table, with what the peers are."""
    print_table(
        report,
        "peers",
        fmt,
        fmt_ratio,
        "ratio = agentenv / peer, both measured in this run (below 1: agentenv is faster). "
        f"SWE-ReX {SWEREX_VERSION}: swerex-remote in {SWEREX_IMAGE} (FROM {IMAGE}), driven "
        "by RemoteRuntime over HTTP (a new connection per request, as it does); docker-py: "
        "containers.run + exec_run (+ forced removal), network none.",
    )


# -- main ------------------------------------------------------------------------------------


async def run_all(cfg: Config, raw_ids: set[str]) -> Report:
    """Every section of this benchmark, in order, on the engine's host."""
    engine = await get_engine()
    raw = RawContainers(engine.client)
    raw.ids = raw_ids  # shared, so that the final sweep knows them even after a crash
    report = await start_report(engine)
    report.details["swe_rex"] = SWEREX_VERSION
    await anyio.to_thread.run_sync(build_swerex_image, engine.client, cfg.rebuild)
    step(f"SWE-ReX {SWEREX_VERSION} ({SWEREX_IMAGE})")
    await run_sections(
        report,
        [
            ("exec", lambda: bench_exec(cfg, raw, report)),
            ("create", lambda: bench_create(cfg, raw, report)),
            ("concurrent", lambda: bench_concurrent(cfg, raw_ids, report)),
        ],
    )
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    cfg = Config.from_args(argv)
    quiet_swerex_logs()
    raw_ids: set[str] = set()
    return run_benchmark(cfg, lambda: run_all(cfg, raw_ids), show, raw_ids)


if __name__ == "__main__":
    sys.exit(main())
