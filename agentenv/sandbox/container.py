"""What the container backends (Docker, Podman) share beyond the executor: the keep-alive
process, the labels of a sandbox and of a snapshot, pausing and resuming (straight through
the container's cgroup where this host may, else by the engine, reconciled with the
container's real state), and how a failed call is explained from that state (both engines
report it with the same fields)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio

from agentenv.log import get_logger
from agentenv.sandbox import cgroup
from agentenv.sandbox.channel import ExecutorGone, StreamClosed
from agentenv.sandbox.errors import SandboxClosed, SandboxError, SandboxUnavailable
from agentenv.sandbox.labels import KEPT, OWNER, labels_for
from agentenv.sandbox.spec import SandboxSpec

log = get_logger(__name__)

KEEPALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do /bin/sleep 3600 & wait $!; done"]
"""PID 1's one child (PID 1 is the engine's init, which reaps orphans), idling, by absolute
paths: nothing of ours runs through the sandbox's PATH. The executor is not started here:
PID 1 holds the container's stdin and stdout, which any process in the sandbox can open
through /proc/1/fd, so they cannot carry the protocol."""

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
    /sys/fs/cgroup read-only, a freeze that does not complete). Returns who froze it."""
    if spec.freezer == "auto":
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


FREEZE_ATTEMPTS = 6


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
            if alive and bool(state.get("Paused")) == want:  # type: ignore[union-attr]
                return
            if state is None or not alive or attempt + 1 == FREEZE_ATTEMPTS:
                raise
            await anyio.sleep(0.01 * 2**attempt)


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
