"""What the container backends (Docker, Podman) share beyond the executor: the keep-alive
process, the labels of a sandbox and of a snapshot, pausing and resuming (straight through
the container's cgroup where this host may, else by the engine, reconciled with the
container's real state), and how a failed call is explained from that state (both engines
report it with the same fields)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any, Literal

import anyio

from agentenv import guest
from agentenv.log import get_logger
from agentenv.sandbox import cgroup
from agentenv.sandbox.channel import PYTHON_ARGV, ExecutorGone, StreamClosed
from agentenv.sandbox.errors import (
    ArchiveTooLarge,
    SandboxClosed,
    SandboxError,
    SandboxUnavailable,
)
from agentenv.sandbox.files import numeric_owner
from agentenv.sandbox.labels import KEPT, OWNER, labels_for
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)

KEEPALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do /bin/sleep 3600 & wait $!; done"]
"""PID 1's one child (PID 1 is the engine's init, which reaps orphans), idling, by absolute
paths: nothing of ours runs through the sandbox's PATH. The executor is not started here:
PID 1 holds the container's stdin and stdout, which any process in the sandbox can open
through /proc/1/fd, so they cannot carry the protocol."""

NSOP = [sys.executable, "-I", "-S", guest.path("nsop")]
"""Runs ``guest/nsop.py`` (work on a container's files from the host, inside its mount namespace)
with this Python: add the operation and its arguments."""
_READ_GUARD_S = 900.0  # reading a bounded workdir takes less; more means something hangs


async def read_in_namespace(
    pid: int, sandbox_id: str, path: str, out: IO[bytes], max_bytes: int | None
) -> str:
    """Write a tar of ``path`` (under its own name, as the engines give it) to ``out``, read
    by host root inside the mount namespace of the sandbox's PID 1 ``pid`` (``nsop.py``):
    for a frozen sandbox, whose processes cannot change it meanwhile. Returns what was left
    out (a file a frozen process holds a lease on), empty if nothing. Raises
    :class:`FileNotFoundError` (no ``path``), :class:`ArchiveTooLarge` (past ``max_bytes``,
    reading stops) and :class:`SandboxError` (the read failed or took over 15 minutes)."""
    written = 0
    # stderr to a file: a pipe nobody reads while stdout is read would fill and stall it
    with tempfile.TemporaryFile() as errors:
        argv = [*NSOP, "tar", str(pid), sandbox_id, path]
        async with await anyio.open_process(argv, stdin=None, stderr=errors) as proc:
            assert proc.stdout is not None
            try:
                with anyio.fail_after(_READ_GUARD_S):
                    async for chunk in proc.stdout:
                        written += len(chunk)
                        if max_bytes is not None and written > max_bytes:
                            raise ArchiveTooLarge(
                                f"the archive of {path} is larger than {max_bytes} bytes"
                            )
                        out.write(chunk)
                    code = await proc.wait()
            except BaseException as e:
                proc.kill()
                if isinstance(e, TimeoutError):
                    raise SandboxError(f"reading {path} took over {_READ_GUARD_S:.0f} s") from e
                raise
        errors.seek(0)
        said = errors.read(1 << 16).decode(errors="replace").strip()
    if code == 3:
        raise FileNotFoundError(2, "no such file or folder in the sandbox", path)
    if code != 0:
        raise SandboxError(f"reading {path}: {said}")
    return said


InspectState = Callable[[], Awaitable[dict[str, Any] | None]]
"""Reads the container's ``State`` (``None``: the container is gone); raises
:class:`SandboxUnavailable` when the engine cannot say."""


def sandbox_labels(spec: SandboxSpec) -> dict[str, str]:
    """The labels a sandbox of ``spec`` carries: ours (owner, run, expiry) and the spec's."""
    labels = labels_for("sandbox", spec.ttl_s, spec.labels)
    if spec.outlive_owner:
        labels[OWNER] = KEPT  # no owner process: only the expiry applies
    return labels


def snapshot_labels(spec: SandboxSpec, keep_s: float | None) -> dict[str, str]:
    """A snapshot's labels: collectable once its process is gone, or, with ``keep_s``, only
    once that long has passed."""
    labels = labels_for("snapshot", keep_s or spec.ttl_s, spec.labels)
    if keep_s is not None:
        labels[OWNER] = KEPT
    return labels


FrozenBy = Literal["cgroup", "engine"]
"""Who froze a paused sandbox, and so who thaws it: this host, through the container's cgroup
freezer (the engine still reports the container running), or the engine."""

_said: set[str] = set()  # fallback reasons logged already: once per process each


async def freeze(
    sandbox_id: str, spec: SandboxSpec, engine_freeze: Callable[[bool], Awaitable[None]]
) -> FrozenBy:
    """Freeze every process of the sandbox. With ``spec.freezer == "auto"`` by writing its
    cgroup freezer from this host (under a millisecond; the engine serialises its own pauses
    through a fresh runc process each, tens of ms and seconds under load), falling back to
    ``engine_freeze(True)``, with a log line, where this host cannot (a remote engine,
    /sys/fs/cgroup read-only, a freeze that does not complete). ``AGENTENV_FREEZER=engine``
    in the environment makes every sandbox ask the engine (an operator's switch, and the
    benchmarks' baseline). Returns who froze it."""
    if spec.freezer == "auto" and os.environ.get("AGENTENV_FREEZER", "auto") != "engine":
        path = cgroup.freezer(sandbox_id)
        if path is None:
            _fallback(sandbox_id, "no cgroup freezer of it that this process may write")
        else:
            try:
                await cgroup.set_frozen(path, True)
                return "cgroup"
            except (OSError, TimeoutError) as e:
                _fallback(sandbox_id, f"{type(e).__name__}: {e}")
    await engine_freeze(True)
    return "engine"


def _fallback(sandbox_id: str, reason: str) -> None:
    if reason not in _said:
        _said.add(reason)
        log.info("sandbox.freeze_by_engine", id=sandbox_id[:12], reason=reason)


async def thaw(
    sandbox_id: str, frozen_by: FrozenBy, engine_freeze: Callable[[bool], Awaitable[None]]
) -> None:
    """Thaw what :func:`freeze` froze, the way it was frozen; :class:`SandboxUnavailable`
    if a cgroup-frozen sandbox's cgroup is gone (its container stopped or was removed)."""
    if frozen_by == "engine":
        await engine_freeze(False)
        return
    path = cgroup.freezer(sandbox_id)
    if path is None:
        raise SandboxUnavailable(f"sandbox {sandbox_id[:12]}: its container is gone")
    try:
        await cgroup.set_frozen(path, False)
    except (OSError, TimeoutError) as e:
        raise SandboxUnavailable(f"sandbox {sandbox_id[:12]}: cannot thaw it: {e}") from e


def frozen_here(sandbox_id: str) -> bool:
    """Whether the container's cgroup is frozen, whoever froze it: how another process (an
    attach, ``agentenv gc``) learns of a freeze the engine was not told about."""
    path = cgroup.freezer(sandbox_id)
    try:
        return path is not None and cgroup.is_frozen(path)
    except OSError:  # removed meanwhile
        return False


def who_froze(sandbox_id: str, engine_paused: bool) -> FrozenBy | None:
    """Who froze a container another process left (what an attach must know to thaw it):
    the engine if it says paused, else this host if its cgroup is frozen (the engine calls
    such a container running); ``None`` if it runs."""
    if engine_paused:
        return "engine"
    return "cgroup" if frozen_here(sandbox_id) else None


def seen_status(sandbox_id: str, engine_status: str) -> str:
    """A container's status as a person listing sandboxes should see it: "paused" when its
    cgroup is frozen though the engine calls it running."""
    if engine_status == "running" and frozen_here(sandbox_id):
        return "paused"
    return engine_status


def thaw_before_removal(sandbox_id: str) -> None:
    """Thaw a container whose cgroup is frozen, so that the engine's kill is not held up by
    frozen processes that cannot take a signal (cgroup v1). Blocking, best effort."""
    path = cgroup.freezer(sandbox_id)
    try:
        if path is not None and cgroup.is_frozen(path):
            cgroup.ask(path, False)
    except OSError:
        pass  # gone meanwhile, or not ours to write: the engine's kill still runs


FREEZE_ATTEMPTS = 12  # runc's freezer gives up while processes fork: ~3 s of tries


async def set_frozen(
    want: bool,
    call: Callable[[], Awaitable[object]],
    inspect: InspectState,
    retryable: Callable[[Exception], bool],
) -> None:
    """Pause (``want``) or resume a container with the engine's ``call``. An engine under load
    sometimes answers a conflict ("already paused", "not paused") its own state then
    contradicts, and runc's cgroup-v1 freezer sometimes gives up while processes start
    ("unable to freeze", runc#2753): after such an answer the container's real state
    decides; it is done when the state is as asked, else the call is tried again. Raises
    the last error otherwise."""
    for attempt in range(FREEZE_ATTEMPTS):
        try:
            await call()
            return
        except Exception as e:
            if not retryable(e):
                raise
            state = await inspect()
            alive = state is not None and (state.get("Running") or state.get("Paused"))
            log.info("sandbox.freeze_conflict", want=want, attempt=attempt, error=str(e)[-300:],
                     paused=bool(state and state.get("Paused")))  # fmt: skip
            if alive and bool(state.get("Paused")) == want:  # type: ignore[union-attr]
                return
            if state is None or not alive or attempt + 1 == FREEZE_ATTEMPTS:
                raise
            await anyio.sleep(min(0.01 * 2**attempt, 0.5))


async def explain_failure(
    sandbox_id: str,
    cause: BaseException,
    *,
    closed: bool,
    paused: bool,
    inspect: InspectState,
    describe: Callable[[BaseException], str] = lambda e: f"{type(e).__name__}: {e}",
) -> SandboxError:
    """The error for a failed call: :class:`SandboxClosed` if we closed it, else
    :class:`SandboxUnavailable` saying what happened to the container, else (it is alive)
    a :class:`SandboxError` carrying the cause."""
    short = sandbox_id[:12]
    if closed:
        return SandboxClosed(f"sandbox {short} was closed")
    # An executor's stream can end a moment before the engine records the container as
    # stopped: then look again for a little while before blaming the executor alone.
    looks = 20 if isinstance(cause, (ExecutorGone, StreamClosed)) else 1
    for look in range(looks):
        try:
            state = await inspect()
        except SandboxUnavailable as e:
            return e
        if state is None:
            return SandboxUnavailable(f"sandbox {short}: its container was removed")
        if not (state.get("Running") or state.get("Paused")):  # Podman: paused isn't running
            why = "OOM-killed" if state.get("OOMKilled") else f"exit code {state.get('ExitCode')}"
            return SandboxUnavailable(
                f"sandbox {short}: its container stopped ({why}, status {state.get('Status')})"
            )
        if state.get("Paused") and not paused:
            return SandboxUnavailable(f"sandbox {short} was paused by someone else")
        if look + 1 < looks:
            await anyio.sleep(0.1)
    if isinstance(cause, ExecutorGone):
        # Killed by a command, or OOM-killed; the next call starts a new executor.
        return SandboxError(
            f"sandbox {short}: the command's executor died ({cause}); the sandbox is still running"
        )
    return SandboxError(f"sandbox {short}: {describe(cause)}")


# -- recycling -------------------------------------------------------------------------------

_SLEEP = ["/bin/sleep", "3600"]


def _proc(pid: int) -> tuple[int, bool, list[str]] | None:
    """A host process's parent pid, whether every one of its uids is root, and its argv
    (``None``: gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    ppid = int(fields.get("PPid", "0").strip() or 0)
    root = all(u == "0" for u in fields.get("Uid", "x").split())
    return ppid, root, [a.decode(errors="replace") for a in argv]


def _ours(pids: list[int], init_pid: int) -> set[int]:
    """The processes a new sandbox has: its init, the keep-alive (root, by its exact argv,
    a child of init) and the keep-alive's sleep (or its fork about to become one)."""
    keep = {init_pid}
    info = {pid: _proc(pid) for pid in pids}
    grew = True
    while grew:
        grew = False
        for pid, seen in info.items():
            if pid in keep or seen is None:
                continue
            ppid, root, argv = seen
            if root and ppid in keep and argv in (KEEPALIVE, _SLEEP):
                keep.add(pid)
                grew = True
    return keep


async def kill_all_but_ours(sandbox_id: str, init_pid: int, *, timeout_s: float = 5.0) -> bool:
    """Kill every process in the container but its init and keep-alive, from this host,
    with the container frozen meanwhile (nothing can fork away from the kill); ``True``
    once only those are left. ``False`` where this host cannot see its cgroup, or if
    another process survives."""
    path = cgroup.freezer(sandbox_id)
    if path is None or init_pid <= 0:
        return False
    procs = path.parent / "cgroup.procs"

    def listed() -> list[int]:
        return [int(p) for p in procs.read_text().split()]

    try:
        await cgroup.set_frozen(path, True)
        try:
            pids = listed()
            keep = _ours(pids, init_pid)
            for pid in pids:
                if pid not in keep:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        finally:
            await cgroup.set_frozen(path, False)
        with anyio.move_on_after(timeout_s):
            while True:
                pids = listed()
                if set(pids) <= _ours(pids, init_pid):
                    return True
                await anyio.sleep(0.005)
    except (OSError, TimeoutError) as e:
        log.info("sandbox.recycle_failed", id=sandbox_id[:12], error=str(e))
    return False


WIPE = guest.source("wipe").decode()
"""The source of ``guest/wipe.py``, run as the sandbox's user (``[*PYTHON_ARGV, WIPE,
"UID:GID|FIXED|SHARED"]``) once only init and keep-alive are left: empties the folders a
read-only sandbox may write (``FIXED``, the workdir and scratch folders, given back to
``UID:GID`` at 0755; ``SHARED``, /tmp, /dev/shm and /dev/mqueue, root's at 1777) and prints
``clean`` only if they are as a new sandbox's, with no System V IPC object and no other
process left."""


def writable_mounts(info: dict[str, Any]) -> list[str]:
    """Where an engine's container description (``inspect``) says a writable mount is:
    Docker's and Podman's ``Mounts`` (volumes, binds; not the ``--tmpfs`` ones)."""
    return [str(m.get("Destination")) for m in info.get("Mounts") or [] if m.get("RW")]


def _reset_peaks(sandbox_id: str) -> None:
    """Zero the memory cgroup's high-water mark and failure count, which the last episode
    set and the next could read (best effort: v1 files; v2's peak resets only on kernels
    that allow writing it)."""
    for place in cgroup.places(sandbox_id):
        for name in ("memory.max_usage_in_bytes", "memory.failcnt", "memory.peak"):
            for root in (cgroup.ROOT / "memory" / place, cgroup.ROOT / place):
                with contextlib.suppress(OSError):
                    (root / name).write_text("0")


async def recycle(
    sandbox_id: str,
    spec: SandboxSpec,
    init_pid: int,
    writable: list[str],
    restart: Callable[[], Awaitable[None]],
    run: Callable[[list[str]], Awaitable[Any]],
) -> bool:
    """Make a read-only sandbox as a new one of ``spec`` would be: every process killed
    but init and keep-alive (:func:`kill_all_but_ours`), its memory peaks zeroed, its
    executor started again (``restart``), and its writable folders emptied and checked by
    :data:`WIPE`, run as its user through ``run``. ``False`` (the caller must close it)
    where any step fails or cannot be done here: a sandbox of another runtime, or with a
    writable mount (``writable``, from :func:`writable_mounts`) other than its workdir and
    scratch folders."""
    if not spec.read_only or spec.options.get("runtime"):
        return False  # another runtime's processes may not be the host's to see and kill
    extra = [m for m in writable if m not in (spec.workdir, *spec.scratch)]
    if extra:  # an image's VOLUME: writable, and not among the places emptied
        log.info("sandbox.recycle_refused", id=sandbox_id[:12], said=f"writable {extra}")
        return False
    if not await kill_all_but_ours(sandbox_id, init_pid):
        return False
    _reset_peaks(sandbox_id)
    uid, gid = numeric_owner(spec.user)
    fixed = ",".join((spec.workdir, *spec.scratch))
    try:
        await restart()
        done = await run([*PYTHON_ARGV, WIPE, f"{uid}:{gid}|{fixed}|{_SHARED_PLACES}"])
    except (SandboxError, OSError) as e:
        log.info("sandbox.recycle_failed", id=sandbox_id[:12], error=str(e))
        return False
    said = (done.stdout + done.stderr).strip()
    if done.exit_code != 0 or said != "clean":
        log.info("sandbox.recycle_refused", id=sandbox_id[:12], said=said[-500:])
        return False
    return True


_SHARED_PLACES = "/tmp,/dev/shm,/dev/mqueue"
