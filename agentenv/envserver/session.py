"""One WebSocket connection's session: one episode at a time, over the driven-episode seam
(:mod:`agentenv.rl.driven`), each client frame answered with exactly one frame.

A reset opens an episode (closing the one open); a step runs one action as the episode's
next turn (the sandbox thawed for it and frozen again); the step that ends the episode
carries the reward and what a trainer takes back. Whatever goes wrong is an error frame and
the session goes on: a bad action runs nothing; a sandbox that died closes its episode
(a reset opens another); a step after the end is refused, not answered again.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import anyio
from pydantic import ValidationError

from agentenv import log
from agentenv.agent.trajectory import Limits
from agentenv.envserver.observation import (
    ListedTools,
    MessageObservation,
    ResetObservation,
    ToolCallObservation,
    ToolError,
    mcp_tools,
    outcome,
    tool_outcomes,
)
from agentenv.envserver.protocol import (
    CallTool,
    EpisodeState,
    ErrorCode,
    Frame,
    ListTools,
    ProtocolError,
    ResetData,
    error_frame,
    observation_frame,
    parse_action,
    state_frame,
)
from agentenv.envserver.taskset import TaskSet, UnknownTask
from agentenv.rl.driven import Acted, ActionError, DrivenEpisode, EpisodeOver, open_episode

__all__ = ["Session"]

_log = log.get_logger(__name__)


class Session:
    """The episode of one connection, and the answer to each of its frames."""

    def __init__(self, tasks: TaskSet, *, limits: Limits | None = None, backend: str | None = None):
        self.tasks = tasks
        self.limits = limits
        self.backend = backend
        self.episode: DrivenEpisode | None = None
        self.episode_id: str | None = None
        self.step_count = 0
        self.failed: str | None = None  # why the last episode was closed under the client
        self._reset_s = 0.0
        self._acts_s = 0.0

    async def answer(self, frame: Frame) -> str:
        """The one frame that answers ``frame`` (never raises for what the client sent or
        what its episode did; ``close`` is the server's to handle)."""
        try:
            if frame.type == "reset":
                return await self._reset(frame.data)
            if frame.type == "step":
                return await self._step(frame.data)
            if frame.type == "state":
                return state_frame(self.state())
            if frame.type == "mcp":
                return _no_mcp(frame.data)
            raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {frame.type}")
        except ProtocolError as e:
            return error_frame(e.code, e.message)

    def state(self) -> dict[str, Any]:
        """Where the episode is: its id and task, the steps taken, whether it is over (its
        reward and why then), or why it was closed."""
        episode = self.episode
        result = episode.result if episode is not None else None
        return EpisodeState(
            episode_id=self.episode_id,
            step_count=self.step_count,
            task_id=episode.task.id if episode is not None else None,
            done=episode.done if episode is not None else False,
            reward=result.reward if result is not None else None,
            stop_reason=result.stop_reason if result is not None else None,
            error=self.failed,
        ).model_dump()

    async def close(self) -> None:
        """Close the open episode (its sandbox removed); safe to call twice."""
        episode, self.episode = self.episode, None
        if episode is not None:
            with anyio.CancelScope(shield=True):
                await episode.close()

    async def _reset(self, data: Any) -> str:
        try:
            asked = ResetData.model_validate(data or {})
        except ValidationError as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"Invalid reset: {e}") from e
        try:
            task = self.tasks.pick(asked.task_id, asked.seed)
        except UnknownTask as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, str(e)) from e
        await self.close()
        self.episode_id = asked.episode_id or uuid.uuid4().hex
        self.step_count, self.failed, self._acts_s = 0, None, 0.0
        started = time.monotonic()
        try:
            episode = await open_episode(task, limits=self.limits, backend=self.backend)
        except Exception as e:  # preparing the task failed: this reset, not the server
            _log.warning("envserver.reset_failed", task=task.id, error=f"{type(e).__name__}: {e}")
            self.failed = f"could not prepare task {task.id!r}: {e}"
            raise ProtocolError(ErrorCode.FACTORY_ERROR, self.failed) from e
        self.episode = episode
        self._reset_s = time.monotonic() - started
        instruction = next(
            (m["content"] for m in reversed(episode.messages) if m["role"] == "user"), ""
        )
        ids = {"task_id": task.id, "episode_id": self.episode_id}
        observation = ResetObservation(
            instruction=instruction,
            messages=[dict(m) for m in episode.messages],
            tools_openai=episode.tools,
            **ids,
            metadata={"instruction": instruction, **ids, "step_count": 0},
        )
        return observation_frame(observation.model_dump(mode="json"), None, False)

    async def _step(self, data: dict[str, Any]) -> str:
        episode = self.episode
        if episode is None:
            why = f"the last episode was closed: {self.failed}. " if self.failed else ""
            raise ProtocolError(ErrorCode.SESSION_ERROR, f"{why}no episode: send reset first")
        if episode.done:
            raise ProtocolError(
                ErrorCode.SESSION_ERROR,
                "the episode is over (its last step said done=true): send reset to start another",
            )
        action = parse_action(data)
        if isinstance(action, ListTools):
            listed = ListedTools(tools=mcp_tools(episode.tools), metadata=self._meta())
            return observation_frame(listed.model_dump(mode="json"), None, False)
        message = _message_of(action) if isinstance(action, CallTool) else action
        acted = await self._act(episode, message)
        meta = self._meta()
        if acted.done:
            meta.update(outcome(acted, reset_s=self._reset_s, acts_s=self._acts_s))
        body: ToolCallObservation | MessageObservation
        if isinstance(action, CallTool):
            body = _tool_observation(action, acted, episode, meta)
        else:
            body = MessageObservation(
                messages=acted.messages,
                tool_results=tool_outcomes(acted.tool_results),
                metadata=meta,
            )
        return observation_frame(body.model_dump(mode="json"), acted.reward, acted.done)

    async def _act(self, episode: DrivenEpisode, message: dict[str, Any]) -> Acted:
        started = time.monotonic()
        try:
            acted = await episode.act(message)
        except ActionError as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"Invalid action: {e}") from e
        except EpisodeOver as e:
            raise ProtocolError(ErrorCode.SESSION_ERROR, str(e)) from e
        except Exception as e:  # the sandbox died under it: the episode is closed
            _log.warning(
                "envserver.episode_failed",
                episode=self.episode_id,
                error=f"{type(e).__name__}: {e}",
            )
            self.failed = f"the episode failed and was closed ({type(e).__name__}: {e})"
            await self.close()
            raise ProtocolError(
                ErrorCode.EXECUTION_ERROR, f"{self.failed}: send reset to start another"
            ) from e
        finally:
            self._acts_s += time.monotonic() - started
        self.step_count += 1
        return acted

    def _meta(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "task_id": self.episode.task.id if self.episode is not None else None,
            "step_count": self.step_count,
        }


def _message_of(call: CallTool) -> dict[str, Any]:
    """A ``call_tool`` action as the assistant message that makes that one call."""
    function = {"name": call.tool_name, "arguments": json.dumps(call.arguments)}
    tool_call = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": function}
    return {"role": "assistant", "content": "", "tool_calls": [tool_call]}


def _tool_observation(
    call: CallTool, acted: Acted, episode: DrivenEpisode, meta: dict[str, Any]
) -> ToolCallObservation:
    """A ``call_tool`` step's observation: its one result, an error as OpenEnv says one."""
    if not acted.tool_results:  # a limit ended the episode before the call
        result = f"not run: the episode ended ({acted.stop_reason})"
        return ToolCallObservation(
            tool_name=call.tool_name, result=result, messages=acted.messages, metadata=meta
        )
    ran = acted.tool_results[0]
    error = None
    if ran.error:
        known = {t["function"]["name"] for t in episode.tools}
        kind = "execution_error" if call.tool_name in known else "tool_not_found"
        error = ToolError(error_type=kind, message=ran.text)
    return ToolCallObservation(
        tool_name=call.tool_name,
        result=None if error else ran.text,
        error=error,
        messages=acted.messages,
        metadata=meta,
    )


def _no_mcp(data: Any) -> str:
    """The JSON-RPC answer to an ``mcp`` frame: not served here (tools go by ``step``)."""
    request_id = data.get("id") if isinstance(data, dict) else None
    error = {
        "code": -32601,
        "message": "JSON-RPC is not served: send the step actions list_tools and call_tool",
        "data": None,
    }
    return json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": request_id, "error": error}})
