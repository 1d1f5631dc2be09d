"""Waiting for a task's healthcheck before the agent gets its sandbox (Harbor's
``[environment] healthcheck``, :class:`~agentenv.tasks.Healthcheck`), as Harbor's
environments run it (Docker HEALTHCHECK's semantics): the command is tried until it exits 0;
within the start period a failure does not count and the next try comes after
``start_interval_s``; after it, the ``retries``-th failure in a row fails, each try
``interval_s`` after the last. Every try is bounded by ``timeout_s``, so a check that never
passes ends within start period + retries x (timeout + interval): never a hang.

Called once, where every driver's agent sandbox starts
(:func:`~agentenv.runner.episode.start_sandbox`), so eval, RL and refactor all wait the same.
A check that never passes is :class:`HealthcheckFailed`, an infrastructure error (the
episode is retried, never graded) naming the task and what the check said last."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

from agentenv.errors import SandboxError
from agentenv.log import get_logger
from agentenv.sandbox.protocol import ExecResult, Sandbox
from agentenv.tasks import Healthcheck

log = get_logger(__name__)

_SAID = 1000  # characters of the last try's output kept in the error


class HealthcheckFailed(SandboxError):
    """A task's healthcheck did not pass: the sandbox is not fit to hand to the agent."""


async def wait_healthy(
    box: Sandbox,
    check: Healthcheck,
    *,
    task_id: str,
    workdir: str,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> None:
    """Return once ``check`` passes in ``box`` (as the sandbox's user, in ``workdir``, with
    the sandbox's environment); raise :class:`HealthcheckFailed` when it fails for good."""
    started = time.monotonic()
    grace_ends = started + check.start_period_s
    failures, tries = 0, 0
    while True:
        in_grace = time.monotonic() < grace_ends
        ran = await box.exec(["bash", "-c", check.command], timeout=check.timeout_s, cwd=workdir)
        tries += 1
        if ran.ok and not ran.timed_out:
            log.debug("healthcheck.passed", task=task_id, tries=tries)
            return
        if in_grace:
            await sleep(check.start_interval_s)
            continue
        failures += 1
        if failures >= check.retries:
            raise HealthcheckFailed(_why(check, task_id, ran, failures, started))
        await sleep(check.interval_s)


def _why(check: Healthcheck, task_id: str, ran: ExecResult, failures: int, started: float) -> str:
    outcome = f"timed out after {check.timeout_s:g} s" if ran.timed_out else f"exit {ran.exit_code}"
    said = (ran.stdout + ran.stderr).strip()[-_SAID:] or "(no output)"
    return (
        f"task {task_id!r}: its [environment] healthcheck `{check.command}` did not pass "
        f"({failures} failure(s) in a row after the start period, "
        f"{time.monotonic() - started:.1f} s in all); the sandbox was not handed to the "
        f"agent. Its last try: {outcome}; its output:\n{said}"
    )


__all__ = ["HealthcheckFailed", "wait_healthy"]
