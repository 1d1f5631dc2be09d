"""An episode driven from outside, one assistant message at a time: what an environment
server (OpenEnv's ``reset`` / ``step``) and a trainer's environment (verifiers) need, where
the trainer's policy generates and agentenv only runs what it says.

It is a :class:`~agentenv.rl.rollout.Rollout` whose model is the caller: :meth:`DrivenEpisode.act`
hands the policy's message to the rollout's next turn, which runs through the same loop as
every episode (the task's tools and MCP servers', malformed calls answered as errors, the
limits, a multi-step task's steps). Between two acts, while the caller's policy generates,
**the sandbox is frozen**; that time is the turn's ``model_s`` and ``paused_s``, as a model
call's is. The act that ends the episode verifies it (the hidden verifier, in a checker
sandbox) and carries the reward and the whole trajectory::

    episode = await open_episode(task)
    messages, tools = episode.messages, episode.tools   # what the policy is shown
    acted = await episode.act({"role": "assistant", "tool_calls": [...]})
    ...                                                 # until acted.done
    acted.reward, acted.trajectory

:meth:`DrivenEpisode.close` lets go of an episode left unfinished (its sandbox removed, its
prepared state released); closing a finished one does nothing.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel

from agentenv.agent.tools import ToolResult, tool_schemas
from agentenv.agent.trajectory import Limits, StopReason, Trajectory
from agentenv.errors import AgentenvError
from agentenv.model.types import Completion, StreamEvent, ToolCall
from agentenv.rl.rollout import Rollout, start
from agentenv.runner.episode import release
from agentenv.tasks import Task

__all__ = ["Acted", "ActionError", "DrivenEpisode", "EpisodeOver", "open_episode"]


class ActionError(AgentenvError, ValueError):
    """An action that is not an assistant message (nothing ran; the episode goes on)."""


class EpisodeOver(AgentenvError):
    """An act on an episode that has ended (or was closed)."""


class Acted(BaseModel):
    """What one act gave back: the messages it added after the policy's own (tool results,
    and a multi-step task's next instruction), whether the episode is over, and then its
    reward (``None`` for a task without a verifier), why it ended and its trajectory.
    ``tool_results`` are the turn's calls as they ran (their ``error`` flag, full output),
    in the order of the message's ``tool_calls`` (none when a limit ended it first)."""

    messages: list[dict[str, Any]]
    done: bool
    tool_results: list[ToolResult] = []
    reward: float | None = None
    stop_reason: StopReason | None = None
    trajectory: Trajectory | None = None


class _Given:
    """The driven rollout's model: a turn's completion is the message the caller gave."""

    def __init__(self) -> None:
        self.next: Completion | None = None

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: Callable[[StreamEvent], Awaitable[None] | None] | None = None,
    ) -> Completion:
        """The caller's message (set by :meth:`DrivenEpisode.act` right before)."""
        done, self.next = self.next, None
        if done is None:  # only act() steps the rollout, after setting it
            raise EpisodeOver("the driven episode took a turn without an action")
        return done


def completion_of(message: dict[str, Any] | Completion) -> Completion:
    """An assistant message in OpenAI's chat form (``content``, ``reasoning_content``,
    ``tool_calls`` of ``{"id", "function": {"name", "arguments"}}``; ``arguments`` as JSON
    text or an object; a call may also be flat ``{"name", "arguments"}``), with optional
    ``token_ids``, ``logprobs`` and ``prompt_token_ids`` of the policy's own (what the token
    export concatenates), as the turn's :class:`Completion`.
    :class:`ActionError` names what is wrong."""
    if isinstance(message, Completion):
        return message
    if not isinstance(message, dict):
        raise ActionError(f"an action is an assistant message (an object), not {message!r}")
    role = message.get("role", "assistant")
    if role != "assistant":
        raise ActionError(f"an action is the assistant's message, not role {role!r}")
    content = message.get("content") or ""
    if not isinstance(content, str):
        raise ActionError("an action's 'content' must be text")
    calls = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        if not isinstance(raw, dict):
            raise ActionError(f"tool_calls[{i}] must be an object")
        function = raw.get("function", raw)
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ActionError(f"tool_calls[{i}] names no function ('function': {{'name': ...}})")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)  # an object: as the wire would carry it
        call_id = raw.get("id") or f"call_{uuid.uuid4().hex[:12]}"
        calls.append(ToolCall(id=str(call_id), name=name, arguments=arguments))
    token_ids = message.get("token_ids")
    logprobs = message.get("logprobs")
    try:
        return Completion(
            content=content,
            reasoning_content=message.get("reasoning_content") or "",
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
            token_ids=token_ids,
            prompt_token_ids=message.get("prompt_token_ids"),
            logprobs=logprobs,
        )
    except ValueError as e:  # token_ids / logprobs of the wrong shape
        raise ActionError(f"an action's token_ids or logprobs are malformed: {e}") from e


class DrivenEpisode:
    """One episode driven by :meth:`act` (made by :func:`open_episode`)."""

    def __init__(self, rollout: Rollout, model: _Given, tools: list[dict[str, Any]]):
        self._rollout = rollout
        self._model = model
        self.tools = tools
        """The tools the policy is offered, as a chat request's ``tools`` field."""
        self._lock = anyio.Lock()
        self._since = time.monotonic()  # when the sandbox was last frozen for the caller
        self._over = False
        self._released = False
        self.result: Acted | None = None
        """The act that ended the episode, once it has."""

    @property
    def task(self) -> Task:
        """The episode's task."""
        return self._rollout.task

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (the opening system and user messages first)."""
        return self._rollout.trajectory.messages

    @property
    def done(self) -> bool:
        """Whether the episode has ended."""
        return self._over

    def so_far(self) -> Trajectory:
        """The trajectory as it is (a multi-step task's every conversation)."""
        return self._rollout.so_far()

    async def act(self, message: dict[str, Any] | Completion) -> Acted:
        """Run the policy's ``message`` as the episode's next turn (its tool calls, in the
        sandbox, thawed for them) and freeze the sandbox again; the act that ends the
        episode verifies it. Raises :class:`ActionError` for a message that is not one
        (nothing ran), :class:`EpisodeOver` after the end, and what the sandbox raised when
        it died (the episode is then closed)."""
        done = completion_of(message)
        if self._lock.locked():
            raise ActionError("an act is already running on this episode: wait for it")
        async with self._lock:
            if self._over:
                raise EpisodeOver("the episode is over: open a new one")
            return await self._act(done)

    async def _act(self, done: Completion) -> Acted:
        thinking_s = time.monotonic() - self._since  # the caller's, with the sandbox frozen
        conversation = self._rollout.trajectory
        seen = len(conversation.messages)
        turns = len(conversation.turns)
        self._model.next = done
        try:
            ended = await self._rollout.step()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.close()
            raise
        results: list[ToolResult] = []
        if len(conversation.turns) > turns:  # a limit may end it before the turn
            turn = conversation.turns[-1]
            conversation.paused_s += thinking_s - turn.paused_s
            turn.model_s = turn.paused_s = thinking_s
            results = turn.tool_results
        added = conversation.messages[seen + 1 :]  # after the policy's own message
        if self._rollout.trajectory is not conversation:  # a new step's conversation
            added = [*added, *self._rollout.trajectory.messages[1:]]
        if not ended:
            await self._rollout.box.pause()
            self._since = time.monotonic()
            return Acted(messages=added, done=False, tool_results=results)
        self._over = True
        try:
            trajectory = await self._rollout.finish()
        finally:
            await self._release()
        self.result = Acted(
            messages=added,
            done=True,
            tool_results=results,
            reward=trajectory.reward,
            stop_reason=trajectory.stop_reason,
            trajectory=trajectory,
        )
        return self.result

    async def _release(self) -> None:
        if not self._released:
            self._released = True
            await release(self._rollout.prepared)

    async def close(self) -> None:
        """Let go of an unfinished episode: its MCP sessions, its sandbox, its prepared
        state. Nothing for one that finished; safe to call twice."""
        with anyio.CancelScope(shield=True):
            if not self._over:
                self._over = True
                try:
                    await self._rollout.close()
                finally:
                    await self._release()


async def open_episode(
    task: Task,
    *,
    limits: Limits | None = None,
    backend: str | None = None,
    version: int | str | None = None,
) -> DrivenEpisode:
    """Prepare ``task`` (its setup once; a sandbox at the prepared state), open what the
    policy is offered (the tools, the skills in the instruction) and freeze the sandbox
    until the first :meth:`~DrivenEpisode.act`. ``version`` is stamped on every turn."""
    model = _Given()
    # never suspended: its sandbox is this process's, collected by `gc` once it is gone
    rollout = await start(
        task, model, limits=limits, version=version, backend=backend, outlive=False
    )
    assert isinstance(rollout, Rollout)  # no agent= here: the caller is the agent
    try:
        offer = await rollout.offer()
        await rollout.box.pause()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await rollout.close()
            await release(rollout.prepared)
        raise
    return DrivenEpisode(rollout, model, tool_schemas(offer.tools))
