"""How a failed call on a container sandbox is explained from the container's state (both
engines report it with the same fields)."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from agentenv.sandbox.channel import ExecutorGone, StreamClosed
from agentenv.sandbox.container.freezing import InspectState
from agentenv.sandbox.errors import SandboxClosed, SandboxError, SandboxUnavailable


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
