"""Commands about this machine: ``demo``, ``doctor``, ``images``, ``sandbox ls``, ``gc``."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from agentenv import log
from agentenv.cli._app import (
    ExitCode,
    JsonFlag,
    _fail,
    app,
    backend_of,
    err,
    images_app,
    out,
    print_wide,
    sandbox_app,
)
from agentenv.sandbox import (
    EngineUnavailable,
    Leftover,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    backend_names,
    get_backend,
)
from agentenv.sandbox import gc as gc_mod
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.scratch import collect_leftovers

ENGINE_SCRIPT = Path(__file__).parent.parent / "sandbox" / "docker" / "engine.sh"
BackendOption = Annotated[
    str | None,
    typer.Option("--backend", help="Only this sandbox backend's (default: every one here)."),
]


def _each_backend(
    name: str | None, default: str, act: Callable[[SandboxBackend], list[Leftover]]
) -> list[Leftover]:
    """``act`` on the named backend; without a name, on ``default`` (whose engine must
    answer: its failure is the user's to see) and on every other one that answers."""
    if name is not None:
        return act(get_backend(name))
    rows = act(get_backend(default))
    for each in backend_names():
        if each == default:
            continue
        try:
            rows += act(get_backend(each))
        except EngineUnavailable:
            continue  # not installed or not running here: nothing of ours can be on it
    return rows


@app.command()
def demo(
    ctx: typer.Context,
    image: Annotated[str, typer.Option(help="Image to start.")] = BASE_IMAGE,
    rounds: Annotated[int, typer.Option(min=1, help="Commands and pause/resume cycles.")] = 20,
) -> None:
    """Create a sandbox, run a command, pause and resume it; print the timings."""
    from agentenv.cli.demo import run_demo

    try:
        report = anyio.run(run_demo, SandboxSpec(image=image, backend=backend_of(ctx)), rounds)
    except SandboxError as e:
        raise _fail(str(e), ExitCode.FAILED) from e
    out.print(f"[bold]{escape(report.output)}[/]")
    table = Table("step", "time", title=f"one sandbox ({report.exec_mode} exec path)")
    table.add_row("create → ready", f"{report.create_ms:.0f} ms")
    table.add_row("first command", f"{report.first_exec_ms:.1f} ms")
    table.add_row(f"exec `true` (p50 of {report.rounds})", f"{report.exec_p50_ms:.2f} ms")
    table.add_row(f"pause (p50 of {report.rounds})", f"{report.pause_p50_ms:.1f} ms")
    table.add_row(f"resume (p50 of {report.rounds})", f"{report.resume_p50_ms:.1f} ms")
    table.add_row("CPU of a busy loop while paused 0.5 s", f"{report.paused_cpu_ns / 1e6:.1f} ms")
    out.print(table)


@app.command()
def doctor(
    fix: Annotated[bool, typer.Option("--fix", help="Install/start what is missing.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only problems.")] = False,
    backend: Annotated[
        str, typer.Option("--backend", help="The sandbox backend to check: docker or podman.")
    ] = "docker",
) -> None:
    """Check the sandbox engine and the base image.

    With --fix: install Debian's docker.io (as root), start dockerd and build the base
    image, each only where needed; with --backend podman, Debian's podman and catatonit,
    and the base image in Podman's storage (copied from Docker's when it has it)."""
    if backend == "podman":
        _doctor_podman(fix=fix, quiet=quiet)
        return
    if backend != "docker":
        raise _fail(f"doctor knows the docker and podman backends, not {backend!r}")
    # Setting up an engine is the one thing here that is each backend's own business.
    from agentenv.sandbox.docker.engine import connect
    from agentenv.sandbox.docker.images import base_image_state, build_base

    if fix:
        done = subprocess.run(["bash", str(ENGINE_SCRIPT)], check=False)
        if done.returncode != 0:
            raise _fail("could not get a Docker engine running (see above)", ExitCode.FAILED)
    try:
        engine = connect()
    except SandboxError as e:
        raise _fail(str(e), ExitCode.FAILED) from e
    version = engine.client.version()
    if not quiet:
        out.print(
            f"engine: Docker {version.get('Version')} (API {engine.api_version}), "
            f"{version.get('Os')}/{version.get('Arch')}, kernel {version.get('KernelVersion')}"
        )
    base_ok, state = base_image_state(engine)
    if not base_ok and fix:
        if shutil.which("debootstrap") is None:
            subprocess.run(["bash", str(ENGINE_SCRIPT), "debootstrap"], check=False)
        err.print(
            f"agentenv setup: building {BASE_IMAGE} from Debian packages (a minute or two)",
            soft_wrap=True,
        )
        try:
            build_base(engine)
        except SandboxError as e:
            raise _fail(str(e), ExitCode.FAILED) from e
        base_ok, state = True, "built"
    if not quiet or not base_ok:
        out.print(f"base image {BASE_IMAGE}: {state}")
    if not base_ok:
        out.print("  fix: agentenv images build-base")
        raise typer.Exit(ExitCode.FAILED)


CATATONIT = Path("/usr/libexec/podman/catatonit")  # Podman's init, a package of its own


def _doctor_podman(*, fix: bool, quiet: bool) -> None:
    from agentenv.sandbox.podman.cli import podman_sync
    from agentenv.sandbox.podman.images import base_image_state, put_base_image

    missing = [n for n, p in (("podman", shutil.which("podman")), ("catatonit", None)) if not p]
    if CATATONIT.exists():
        missing = [n for n in missing if n != "catatonit"]
    # the engine script installs Debian packages (and Docker, which the image copy reads)
    if missing and fix and subprocess.run(["bash", str(ENGINE_SCRIPT), *missing]).returncode:
        raise _fail(f"could not install {' '.join(missing)} (see above)", ExitCode.FAILED)
    try:
        version = podman_sync("version", "--format", "{{.Client.Version}}").decode().strip()
        base_ok, state = base_image_state()
        if not base_ok and fix:
            err.print(f"agentenv setup: putting {BASE_IMAGE} into Podman's storage", soft_wrap=True)
            put_base_image()
            base_ok, state = True, "copied or built"
    except SandboxError as e:
        raise _fail(str(e), ExitCode.FAILED) from e
    if not quiet:
        out.print(f"engine: Podman {version} (rootful, no daemon)")
    if not quiet or not base_ok:
        out.print(f"base image {BASE_IMAGE} in Podman: {state}")
    if not base_ok:
        out.print("  fix: agentenv doctor --fix --backend podman")
        raise typer.Exit(ExitCode.FAILED)


@images_app.command("build-base")
def images_build_base(
    tag: Annotated[str, typer.Option(help="Name of the image to build.")] = BASE_IMAGE,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if up to date.")] = False,
    mirror: Annotated[
        str | None, typer.Option(help="Debian mirror; default: this machine's apt source.")
    ] = None,
) -> None:
    """Build the base image from Debian packages (debootstrap + docker import); no registry."""
    log.configure("info")
    from agentenv.sandbox.docker.engine import connect
    from agentenv.sandbox.docker.images import build_base

    try:
        image_id = build_base(connect(), tag=tag, mirror=mirror, force=force)
    except SandboxError as e:
        raise _fail(str(e), ExitCode.FAILED) from e
    out.print(f"{tag} {image_id[7:19]}")


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _print_rows(rows: list[Leftover], title: str) -> None:
    now = dt.datetime.now().timestamp()
    table = Table(title=title)
    # the id is what gets copied into docker and agentenv commands: never cut, the other
    # columns fold to make room
    for name in ("kind", "id", "name", "status", "run", "owner", "age", "expires in", "stale"):
        if name == "id":
            table.add_column(name, no_wrap=True, min_width=12)
        else:
            table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(
            r.kind,
            r.id.removeprefix("sha256:")[:12],
            r.name,
            r.status,
            r.run,
            r.owner,
            _age(now - r.created),
            _age(r.expires - now) if r.expires > now else "expired",
            r.stale or "",
        )
    print_wide(table)


def _print_json(rows: list[Leftover]) -> None:
    for row in rows:
        print(row.model_dump_json())


@sandbox_app.command("ls")
def sandbox_ls(
    ctx: typer.Context, backend: BackendOption = None, as_json: JsonFlag = False
) -> None:
    """List our sandboxes and snapshot images, and which ones gc would remove."""
    try:
        rows = _each_backend(backend, backend_of(ctx), lambda b: b.leftovers())
    except SandboxError as e:
        raise _fail(str(e), ExitCode.FAILED) from e
    if as_json:
        _print_json(rows)
    else:
        _print_rows(rows, f"{len(rows)} agentenv objects")


@app.command()
def gc(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would go.")] = False,
    everything: Annotated[
        bool, typer.Option("--all", help="Remove all of ours, even those in use.")
    ] = False,
    backend: BackendOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Remove sandboxes and snapshots whose owner is gone or whose TTL passed, and the
    temporary workspace archives of runners killed on this host.

    Never touches anything without agentenv's labels."""
    try:
        rows = _each_backend(
            backend,
            backend_of(ctx),
            lambda b: gc_mod.collect(b, everything=everything, dry_run=dry_run),
        )
    except SandboxError as e:
        raise _fail(str(e), ExitCode.FAILED) from e
    files = collect_leftovers(dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    if as_json:
        _print_json(rows)
    elif rows:
        _print_rows(rows, f"{verb} {len(rows)}")
    elif not files:
        out.print(f"{verb} nothing")
    if files and not as_json:
        out.print(
            f"{verb} {len(files)} temporary file(s) and folder(s) of killed runners in "
            f"{files[0].parent}",
            markup=False,
        )
