"""OpenEnv's WebSocket frames, as ``openenv-core``'s clients send and read them.

A client sends one JSON text frame and reads the next one as its answer (there are no
request ids): ``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": <action>}``,
``{"type": "state"}``, ``{"type": "close"}``. The server answers ``{"type": "observation",
"data": {"observation": {...}, "reward": R, "done": D}}``, ``{"type": "state", "data":
{...}}`` or ``{"type": "error", "data": {"message": ..., "code": ...}}``.

A step's action is one of three shapes:

* ``{"type": "list_tools"}`` and ``{"type": "call_tool", "tool_name": ..., "arguments":
  {...}}``: what OpenEnv's ``MCPToolClient`` sends (one tool call per step);
* an assistant message, ``{"role": "assistant", "content": ..., "tool_calls": [...]}``
  (``role`` optional): a trainer's policy output as it is, several calls or a final text,
  with the policy's ``token_ids`` / ``logprobs`` / ``prompt_token_ids`` if it has them.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "AssistantMessage",
    "CallTool",
    "EpisodeState",
    "ErrorCode",
    "Frame",
    "ListTools",
    "ProtocolError",
    "ResetData",
    "error_frame",
    "observation_frame",
    "parse_action",
    "parse_frame",
    "state_frame",
]


class ErrorCode(StrEnum):
    """The error codes of OpenEnv's ``WSErrorCode`` (the client shows ``message (code: X)``)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


class ProtocolError(Exception):
    """A frame the session answers with an error frame (and goes on)."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Frame(BaseModel):
    """A client's frame: its ``type`` and, for reset and step, its ``data``."""

    type: Literal["reset", "step", "state", "close", "mcp"]
    data: Any = None


class ResetData(BaseModel):
    """What a reset may say: the task (by id; else the server picks one: by ``seed`` if
    given, else the next in turn) and the episode's id (else a new one). Other keys are
    ignored, as OpenEnv's server ignores what its environment does not take."""

    model_config = ConfigDict(extra="ignore")

    task_id: str | None = None
    seed: int | None = Field(None, ge=0)
    episode_id: str | None = Field(None, max_length=255)


class ListTools(BaseModel):
    """``{"type": "list_tools"}``: the tools, as MCP describes them (nothing runs)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["list_tools"]
    metadata: dict[str, Any] = {}


class CallTool(BaseModel):
    """``{"type": "call_tool", ...}``: one tool call, the episode's next turn."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["call_tool"]
    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any] = {}
    metadata: dict[str, Any] = {}


class AssistantMessage(BaseModel):
    """An assistant message as an action (described for ``/schema``; the episode checks
    it): its text and/or tool calls (``{"id", "type": "function", "function": {"name",
    "arguments"}}``), and the policy's tokens if the trainer wants the token export."""

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[dict[str, Any]] = []
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None


class EpisodeState(BaseModel):
    """A state frame's data: OpenEnv's ``State`` (``episode_id``, ``step_count``) and where
    the episode is: its task, whether it is over (then its reward and why), or ``error``:
    why it was closed under the client."""

    episode_id: str | None = None
    step_count: int = 0
    task_id: str | None = None
    done: bool = False
    reward: float | None = None
    stop_reason: str | None = None
    error: str | None = None


Action = ListTools | CallTool | dict[str, Any]
"""A parsed step: an MCP-style action, or an assistant message (checked by the episode)."""


def _json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), default=str)


def parse_frame(text: str | bytes) -> Frame:
    """A client's frame; :class:`ProtocolError` with OpenEnv's code when it is not one."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON: {e}") from e
    if not isinstance(raw, dict):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, "a frame is a JSON object")
    kind = raw.get("type")
    if kind not in ("reset", "step", "state", "close", "mcp"):
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {kind}")
    if kind == "step" and not isinstance(raw.get("data"), dict):
        raise ProtocolError(
            ErrorCode.VALIDATION_ERROR, "a step frame's 'data' must be the action (an object)"
        )
    return Frame(type=kind, data=raw.get("data"))


def parse_action(data: dict[str, Any]) -> Action:
    """A step's action: :class:`ListTools`, :class:`CallTool`, or (no ``type``) the
    assistant message as given; :class:`ProtocolError` names what is wrong."""
    kind = data.get("type")
    try:
        if kind == "list_tools":
            return ListTools.model_validate(data)
        if kind == "call_tool":
            return CallTool.model_validate(data)
    except ValidationError as e:
        raise ProtocolError(
            ErrorCode.VALIDATION_ERROR, f"Invalid {kind} action: {_brief(e)}"
        ) from e
    if kind is not None:
        raise ProtocolError(
            ErrorCode.VALIDATION_ERROR,
            f"unknown action type {kind!r}: send list_tools, call_tool, or an assistant "
            "message ({'role': 'assistant', 'content': ..., 'tool_calls': [...]})",
        )
    if not ({"role", "content", "tool_calls"} & data.keys()):
        raise ProtocolError(
            ErrorCode.VALIDATION_ERROR,
            "an action is {'type': 'call_tool', 'tool_name': ..., 'arguments': {...}}, "
            "{'type': 'list_tools'}, or an assistant message with 'content' and/or "
            f"'tool_calls'; got keys {sorted(data)}",
        )
    return data


def _brief(e: ValidationError) -> str:
    """A validation error in one line (OpenEnv's client shows only the message)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'action'}: {err['msg']}" for err in e.errors()
    )


def observation_frame(observation: dict[str, Any], reward: float | None, done: bool) -> str:
    """An observation frame's text."""
    data = {"observation": observation, "reward": reward, "done": done}
    return _json({"type": "observation", "data": data})


def state_frame(state: dict[str, Any]) -> str:
    """A state frame's text."""
    return _json({"type": "state", "data": state})


def error_frame(code: ErrorCode, message: str, **extra: Any) -> str:
    """An error frame's text (``extra`` beside the message and code, as OpenEnv's
    capacity error carries its counts)."""
    return _json({"type": "error", "data": {"message": message, "code": str(code), **extra}})
