"""The tool-call loop: pause the sandbox, ask the model, resume, run its tool calls in order,
append the results; until it submits, stops calling tools, or a limit is hit.

The history is append-only (each request extends the previous one, so the provider's prefix
cache hits), and assistant turns keep their ``reasoning_content`` and tool calls verbatim,
which K3 requires on the next request.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence

from agentenv.agent.tools import DEFAULT_TOOLS, Tool, run_tool, tool_schemas
from agentenv.agent.trajectory import (
    Limits,
    StopReason,
    ToolResultCallback,
    Trajectory,
    Turn,
)
from agentenv.errors import ContextOverflow
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel, Completion
from agentenv.sandbox.protocol import Sandbox

SYSTEM_PROMPT = (
    "You are a careful software engineer working in a Linux sandbox through tools. "
    "Inspect before you change things, check your work by running it, and call submit "
    "when the task is done."
)


def limit_reached(traj: Trajectory, limits: Limits, elapsed_s: float) -> StopReason | None:
    """The limit ``traj`` has hit after ``elapsed_s`` of episode time, if any."""
    if len(traj.turns) >= limits.max_turns:
        return "max_turns"
    if limits.max_output_tokens is not None and traj.completion_tokens >= limits.max_output_tokens:
        return "max_output_tokens"
    if limits.max_cost_usd is not None and traj.cost_usd >= limits.max_cost_usd:
        return "max_cost"
    if limits.wall_time_s is not None and elapsed_s >= limits.wall_time_s:
        return "wall_time"
    return None


def new_trajectory(
    instruction: str, *, task_id: str = "", system_prompt: str = SYSTEM_PROMPT
) -> Trajectory:
    """A trajectory holding only the opening messages."""
    return Trajectory(
        task_id=task_id,
        messages=[
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": instruction},
        ],
    )


def record_turn(
    traj: Trajectory,
    done: Completion,
    *,
    model_s: float,
    paused_s: float,
    policy_version: int | str | None = None,
) -> Turn:
    """Record one model answer in ``traj`` as every agent does (the built-in loop and the
    gateway a harness calls): its history message in the model's own form, its tokens,
    dollars, retries, queueing and paused time. Returns its :class:`Turn`, which the caller
    appends to ``traj.turns`` once it knows the tools' results and time (``tools_s``)."""
    traj.messages.append(done.history_message())  # in the model's own form
    traj.count(done)
    traj.reasoning_tokens += done.usage.reasoning_tokens
    traj.retries += done.retries
    traj.queued_s += done.queued_s
    traj.paused_s += paused_s
    return Turn(
        completion=done,
        model_s=model_s,
        tools_s=0.0,
        paused_s=paused_s,
        policy_version=policy_version,
    )


async def take_turn(
    model: ChatModel,
    sandbox: Sandbox,
    traj: Trajectory,
    *,
    tools: Sequence[Tool] = DEFAULT_TOOLS,
    pause: bool = True,
    on_event: EventCallback | None = None,
    on_tool_result: ToolResultCallback | None = None,
    policy_version: int | str | None = None,
) -> StopReason | None:
    """One turn: (pause) ask the model (resume), run its tool calls in order, append
    everything to ``traj``. The model is shown ``tools`` and only they run. Returns the
    stop reason when the turn ended the episode (``submitted``, ``no_tool_calls``,
    ``context_length``), else ``None``."""
    schemas = tool_schemas(tools)
    t0 = time.monotonic()
    if pause:
        await sandbox.pause()
    try:
        done = await model.complete(traj.messages, schemas, on_event=on_event)
    except ContextOverflow:
        return "context_length"
    finally:
        if pause:
            await sandbox.resume()
    model_s = time.monotonic() - t0
    turn = record_turn(
        traj,
        done,
        model_s=model_s,
        paused_s=model_s if pause else 0.0,
        policy_version=policy_version,
    )
    t1 = time.monotonic()
    results = []
    for call in done.tool_calls:  # in order; one tool message per call
        result = await run_tool(sandbox, call, tools)
        results.append(result)
        if on_tool_result is not None:
            maybe = on_tool_result(result)
            if inspect.isawaitable(maybe):
                await maybe
        traj.messages.append({"role": "tool", "tool_call_id": call.id, "content": result.text})
    turn.tool_results = results
    turn.tools_s = time.monotonic() - t1
    traj.turns.append(turn)
    if any(r.submitted for r in results):
        return "submitted"
    if not done.tool_calls:
        return "no_tool_calls"
    return None


async def run_episode(
    model: ChatModel,
    sandbox: Sandbox,
    instruction: str,
    *,
    task_id: str = "",
    system_prompt: str = SYSTEM_PROMPT,
    limits: Limits | None = None,
    pause: bool = True,
    tools: Sequence[Tool] = DEFAULT_TOOLS,
    on_event: EventCallback | None = None,
    on_tool_result: ToolResultCallback | None = None,
    policy_version: int | str | None = None,
) -> Trajectory:
    """Run one episode in ``sandbox``. With ``pause`` (the default) the sandbox is frozen
    while the model thinks. Failing tool calls go back to the model; a sandbox that dies
    or an endpoint that stays down raises (an infrastructure failure, not a result).
    ``tools`` are what the model is shown and what runs (a task's own set, say).
    ``on_event`` sees the model's stream, ``on_tool_result`` each tool result. (A task's
    instruction with its skills named, and its MCP servers' tools: agentenv.runner.offer.)"""
    limits = limits or Limits()
    started = time.monotonic()
    traj = new_trajectory(instruction, task_id=task_id, system_prompt=system_prompt)
    try:
        while (reason := limit_reached(traj, limits, time.monotonic() - started)) is None:
            reason = await take_turn(
                model,
                sandbox,
                traj,
                tools=tools,
                pause=pause,
                on_event=on_event,
                on_tool_result=on_tool_result,
                policy_version=policy_version,
            )
            if reason is not None:
                break
        traj.stop_reason = reason
        return traj
    finally:
        traj.wall_s = time.monotonic() - started


__all__ = [
    "Limits",
    "Trajectory",
    "Turn",
    "limit_reached",
    "new_trajectory",
    "record_turn",
    "run_episode",
    "take_turn",
]
