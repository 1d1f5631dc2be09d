"""What the server answers a reset and a step with: the observations (plain pydantic
models, dumped into OpenEnv's observation frame), and at the end of an episode what a
trainer takes back (the reward's why, spend, timings, the trajectory and its token export).

OpenEnv's ``MCPToolClient`` reads an observation by its keys: ``tools`` is a tool list,
``tool_name`` a tool call's result, anything else a bare observation of which it keeps only
``metadata``. So a reset's observation has neither key, and says what it carries (the
instruction, the task and episode ids, the opening messages, the tools) in its
``metadata`` as well, where every client sees it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from agentenv.agent.export import NoTokens, to_concat
from agentenv.agent.tools import ToolResult
from agentenv.agent.trajectory import Spend, Trajectory
from agentenv.rl.driven import Acted

__all__ = [
    "ListedTools",
    "McpTool",
    "MessageObservation",
    "ResetObservation",
    "ToolCallObservation",
    "ToolError",
    "ToolOutcome",
    "mcp_tools",
    "outcome",
    "timings",
    "tool_outcomes",
]


class McpTool(BaseModel):
    """A tool as MCP (and OpenEnv's ``Tool``) describes it."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = {}


class ToolError(BaseModel):
    """A tool call that failed, as OpenEnv's ``ToolError`` says it (its client raises it)."""

    error_type: Literal["execution_error", "tool_not_found"]
    message: str


class ResetObservation(BaseModel):
    """A reset's: what the policy is shown. ``tools_openai`` are the tools as a chat
    request's ``tools`` field; ``messages`` the opening system and user messages."""

    instruction: str
    task_id: str
    episode_id: str
    messages: list[dict[str, Any]]
    tools_openai: list[dict[str, Any]]
    metadata: dict[str, Any] = {}


class ListedTools(BaseModel):
    """A ``list_tools`` step's: the tools (nothing ran)."""

    tools: list[McpTool]
    metadata: dict[str, Any] = {}


class ToolCallObservation(BaseModel):
    """A ``call_tool`` step's: the tool's output as the policy sees it (``result``), or
    ``error``; ``messages`` are what the step added to the conversation (the tool's
    message, and a multi-step task's next instruction)."""

    tool_name: str
    result: str | None = None
    error: ToolError | None = None
    messages: list[dict[str, Any]] = []
    metadata: dict[str, Any] = {}


class ToolOutcome(BaseModel):
    """One call of an assistant message's, as it ran."""

    name: str
    text: str
    error: bool = False
    exit_code: int | None = None


class MessageObservation(BaseModel):
    """An assistant message step's: the messages it added to the conversation and each
    call's outcome, in the order of its ``tool_calls``."""

    messages: list[dict[str, Any]]
    tool_results: list[ToolOutcome] = []
    metadata: dict[str, Any] = {}


def mcp_tools(tools_openai: list[dict[str, Any]]) -> list[McpTool]:
    """Chat-request tools (``{"type": "function", "function": {...}}``) as MCP tools."""
    out = []
    for tool in tools_openai:
        function = tool.get("function", tool)
        out.append(
            McpTool(
                name=function["name"],
                description=function.get("description", ""),
                input_schema=function.get("parameters") or {"type": "object", "properties": {}},
            )
        )
    return out


def tool_outcomes(results: list[ToolResult]) -> list[ToolOutcome]:
    """The calls' outcomes, without their full output (the trajectory keeps it)."""
    return [
        ToolOutcome(name=r.name, text=r.text, error=r.error, exit_code=r.exit_code) for r in results
    ]


def outcome(acted: Acted, *, reset_s: float, acts_s: float) -> dict[str, Any]:
    """What the act that ended an episode gives a trainer back, under the observation's
    ``metadata``: why it ended, the reward and the verdict's details, tokens and dollars,
    timings (``reset_s`` preparing it, ``acts_s`` running the policy's actions on this
    server, the trajectory's own, the verifier's), the trajectory (JSON) and its token
    export (``tokens``: ids, loss mask, logprobs; ``None`` with ``tokens_unavailable``
    saying why when the actions carried no token ids)."""
    trajectory = acted.trajectory
    assert trajectory is not None  # a done act carries it
    score = trajectory.score
    tokens: dict[str, Any] | None = None
    unavailable: str | None = None
    try:
        tokens = to_concat(trajectory).model_dump()
    except NoTokens as e:
        unavailable = str(e)
    return {
        "stop_reason": acted.stop_reason,
        "reward": acted.reward,
        "passed": score.passed if score is not None else None,
        "score_error": score.error if score is not None else None,
        "error": trajectory.error,
        **Spend.of(trajectory),
        "reasoning_tokens": trajectory.reasoning_tokens,
        "turns": len(trajectory.turns),
        "timings": timings(trajectory, reset_s=reset_s, acts_s=acts_s),
        "trajectory": trajectory.model_dump(mode="json"),
        "tokens": tokens,
        "tokens_unavailable": unavailable,
    }


def timings(trajectory: Trajectory, *, reset_s: float, acts_s: float) -> dict[str, float]:
    """An episode's phases in seconds: preparing it (``reset_s``), running its actions
    (``acts_s``: tool calls, verifying; ``tools_s`` of which the tools), the policy's time
    with the sandbox frozen (``paused_s``), the verifier's (``verify_s``) and the wall
    time from the first action to the end (``wall_s``)."""
    return {
        "reset_s": round(reset_s, 4),
        "acts_s": round(acts_s, 4),
        "tools_s": round(sum(t.tools_s for t in trajectory.turns), 4),
        "paused_s": round(trajectory.paused_s, 4),
        "verify_s": round(trajectory.score.duration_s, 4) if trajectory.score else 0.0,
        "wall_s": round(trajectory.wall_s, 4),
    }
