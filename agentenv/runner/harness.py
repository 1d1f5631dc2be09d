"""An episode played by a real agent harness (Codex CLI, Claude Code, mini-swe-agent, …) in
place of the built-in loop, in the one lifecycle of :mod:`agentenv.runner.episode`.

What differs from the built-in loop is only the agent's part of the episode:

- the agent's sandbox starts from the task's prepared image with the harness installed on
  top (:func:`~agentenv.harnesses.install.harness_image`: a cached layer), and gets a host
  folder of its own (:attr:`HarnessBox.gateway_dir`) mounted read-only, where the episode's
  model gateway listens on a Unix socket; such a sandbox is never recycled, and the folder
  is removed with it;
- the harness runs in it (:func:`~agentenv.harnesses.run.run_harness`) while a gateway on
  the host (:func:`~agentenv.gateway.session.open_gateway`) answers its model calls: each
  call freezes the sandbox, asks the model, records the turn on the trajectory and thaws.
  The task's limits are the gateway's budgets, and its wall time (else
  :data:`DEFAULT_TIMEOUT_S`) the harness's timeout;
- the trajectory gets the harness's :class:`~agentenv.agent.trajectory.HarnessRun` (exit
  code, why it was stopped, its log's tail, model vs harness time).

Everything else is the built-in loop's: the prepared state, the checker sandbox made from
the task's own image (never the harness's), finish, verify and teardown. A task verified in
its final state (``verify_in`` ``final`` or ``agent``; Harbor's ``final`` and ``shared``
modes) is verified in the agent's own sandbox or a snapshot of it, as for the built-in loop:
with a harness that sandbox is the harness's image, so the verdict's sandbox holds the
harness's layer (``/opt/agentenv-harness`` and the packages it installed), as Harbor's
installed agents live in the container its verifier runs in (docs/gateway.md).

Refused with a harness, by name: a multi-step task (its steps are conversations the
built-in loop drives), a compose task (its services and MCP servers are the built-in
loop's), and the scripted policies that play the built-in
tools (``oracle``, ``command:``, ``replay``), which have no model call a harness could make.
``null`` is a model that never acts, and works.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from pydantic import BaseModel

from agentenv import scratch
from agentenv.agent.trajectory import Limits, StopReason, Trajectory
from agentenv.errors import TaskError
from agentenv.gateway.session import Gateway, open_gateway
from agentenv.harnesses.base import Harness
from agentenv.harnesses.install import check_host, harness_image
from agentenv.harnesses.registry import harness as registered
from agentenv.harnesses.registry import harness_names
from agentenv.harnesses.run import run_harness
from agentenv.log import get_logger
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel
from agentenv.sandbox.image_store import image_store
from agentenv.sandbox.protocol import Sandbox
from agentenv.tasks import Task

log = get_logger(__name__)

DEFAULT_TIMEOUT_S = 1800.0
"""A harness's timeout when its task sets no wall time: as long as the built-in loop's
default command timeout, so that a harness that hangs ends its episode rather than its job."""

BUILT_IN = "builtin"
"""The name of the built-in loop, for messages and job configs (``--agent`` left out)."""

Agent = str | Harness | None
"""Who plays an episode: the built-in loop (``None``), a harness by its registered name,
or a :class:`~agentenv.harnesses.base.Harness` value."""

_SCRIPTED = ("oracle", "command:", "replay")  # play the built-in tools: no model call


class HarnessBox(BaseModel):
    """Where a harness's agent sandbox differs from the built-in loop's: its image (the
    task's prepared image with the harness on top) and the host folder mounted read-only
    at ``/run/agentenv/gateway`` in it, where the episode's gateway listens."""

    harness: Harness
    image: str
    gateway_dir: Path


def agent_name(agent: Agent) -> str | None:
    """The name a job records for ``agent`` (``None`` for the built-in loop)."""
    if agent is None:
        return None
    return agent if isinstance(agent, str) else agent.name


def resolve_agent(agent: Agent) -> Harness | None:
    """The harness ``agent`` names (``None``: the built-in loop). An unknown name is a
    :class:`~agentenv.errors.TaskError` listing the known ones."""
    if agent is None or isinstance(agent, Harness):
        return agent
    known = harness_names()
    if agent not in known:
        raise TaskError(
            f"unknown agent {agent!r}: the known ones are {', '.join(known)} "
            "(leave --agent out for agentenv's built-in loop)"
        )
    return registered(agent)


def refuse_task(task: Task, harness: Harness) -> None:
    """Refuse, by name, a task a harness cannot play (see the module's docstring)."""
    if task.multi_step is not None:
        raise TaskError(
            f"task {task.id!r} has steps: the agent {harness.name!r} cannot run a "
            "multi-step task (each step is a conversation of the built-in loop); "
            "run it without --agent"
        )
    if task.compose is not None:
        raise TaskError(
            f"task {task.id!r} runs beside compose services: the agent {harness.name!r} "
            "cannot run it (its services and MCP servers are the built-in loop's); "
            "run it without --agent"
        )


def refuse_policy(model: str, agent: Agent) -> None:
    """Refuse a scripted policy that plays the built-in tools (``oracle``, ``command:``,
    ``replay``) with a harness: it makes no model call a harness could use."""
    name = agent_name(agent)
    if name is not None and model.startswith(_SCRIPTED):
        raise TaskError(
            f"--model {model.split(':')[0]} plays agentenv's own tools and has no model "
            f"calls for the agent {name!r} to make: run it without --agent, or give a "
            "model (kimi-k3, a URL, null)"
        )


def check_agent(agent: Agent, *, backend: str, model: str | None = None) -> Harness | None:
    """Before any episode: the harness ``agent`` names, checked installable on this host
    (what is missing named with the command that installs it), and ``model`` checked
    playable by it. ``None`` for the built-in loop."""
    harness = resolve_agent(agent)
    if harness is None:
        return None
    if model is not None:
        refuse_policy(model, harness)
    check_host(harness, backend=backend)
    return harness


@asynccontextmanager
async def harness_box(
    harness: Harness, image: str, *, backend: str, snapshot: bool = False
) -> AsyncIterator[HarnessBox]:
    """``async with harness_box(h, prepared.image, backend=...) as hb:`` the harness's
    image built on ``image`` (cached) and a new gateway folder, removed when the block
    ends (after the sandbox that mounts it is closed, in the block). On a ``snapshot``
    (a prepared state after its setup) the harness's image is removed too, once no sandbox
    uses it: it would keep the snapshot from going."""
    built = await harness_image(image, harness, backend=backend)
    try:
        with scratch.folder("gateway") as folder:
            # the sandbox's user (any uid) reaches the socket through it
            os.chmod(folder, 0o755)
            yield HarnessBox(harness=harness, image=built, gateway_dir=Path(folder))
    finally:
        if snapshot:  # the last episode of a group on it removes it (the others' fail)
            with anyio.CancelScope(shield=True):
                await image_store(backend).remove_image(built)


def timeout_of(limits: Limits) -> float:
    """How long the harness may run: the task's wall time, else :data:`DEFAULT_TIMEOUT_S`."""
    return limits.wall_time_s if limits.wall_time_s is not None else DEFAULT_TIMEOUT_S


def stop_reason(gateway: Gateway, stopped: str | None) -> StopReason:
    """Why the episode ended, in the built-in loop's terms: a budget the gateway refused a
    call over, the harness's timeout (``wall_time``), else the harness ended by itself
    (``harness_exited``; how, in :attr:`Trajectory.harness`)."""
    if gateway.stop_reason is not None:
        return gateway.stop_reason
    if stopped == "timeout":
        return "wall_time"
    return "harness_exited"


async def play(
    box: HarnessBox,
    sandbox: Sandbox,
    model: ChatModel,
    traj: Trajectory,
    *,
    instruction: str,
    limits: Limits,
    pause: bool = True,
    on_event: EventCallback | None = None,
    policy_version: int | str | None = None,
) -> Trajectory:
    """Run the harness in ``sandbox`` with ``instruction`` until it ends, its model calls
    answered by ``model`` through a gateway that records each turn on ``traj`` (which is
    filled as it goes: a failure leaves the turns taken). Returns ``traj`` with its stop
    reason, wall time and :class:`~agentenv.agent.trajectory.HarnessRun`. The endpoint
    failing for good raises its error (an infrastructure failure, as in the built-in
    loop); the harness's own failure (crash, hang, flood) is the episode's, in the run."""
    started = time.monotonic()
    try:
        async with open_gateway(
            model,
            traj,
            socket_dir=box.gateway_dir,
            sandbox=sandbox,
            limits=limits,
            pause=pause,
            on_event=on_event,
            policy_version=policy_version,
        ) as gateway:
            run = await run_harness(
                sandbox,
                box.harness,
                instruction,
                gateway,
                model=gateway.model_name,
                timeout_s=timeout_of(limits),
            )
        traj.harness = run
        if gateway.error is not None:
            raise gateway.error
        traj.stop_reason = stop_reason(gateway, run.stopped)
        log.info(
            "harness.ended",
            harness=box.harness.name,
            exit_code=run.exit_code,
            stopped=run.stopped,
            calls=gateway.calls,
        )
        return traj
    finally:
        traj.wall_s = time.monotonic() - started


__all__ = [
    "BUILT_IN",
    "DEFAULT_TIMEOUT_S",
    "Agent",
    "HarnessBox",
    "agent_name",
    "check_agent",
    "harness_box",
    "play",
    "refuse_policy",
    "refuse_task",
    "resolve_agent",
    "stop_reason",
    "timeout_of",
]
