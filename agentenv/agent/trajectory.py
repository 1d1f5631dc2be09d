"""An episode as data: its limits, turns and trajectory (JSON round trip), and what
trainers take from it (one token sequence with a loss mask, or the messages for SFT)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentenv.agent.tools import ToolResult
from agentenv.model.types import Completion
from agentenv.verify import Score

StopReason = Literal[
    "submitted",
    "no_tool_calls",
    "max_turns",
    "max_output_tokens",
    "max_cost",
    "wall_time",
    "context_length",
    "harness_exited",  # an installed harness ended by itself (how: Trajectory.harness)
]


class Limits(BaseModel):
    """When an episode stops even if the agent has not submitted. Each attempt of an
    eval episode has its own (``max_cost_usd`` too: retried, an episode may spend more)."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = 50
    max_output_tokens: int | None = None
    max_cost_usd: float | None = None
    wall_time_s: float | None = None


class Turn(BaseModel):
    """One model call and the tool calls it made."""

    completion: Completion
    tool_results: list[ToolResult] = []
    model_s: float
    tools_s: float
    paused_s: float
    policy_version: int | str | None = None  # the weights that produced this turn


ToolResultCallback = Callable[[ToolResult], Awaitable[None] | None]


class Spend(BaseModel):
    """Tokens and dollars an episode used; every result that reports spend carries these."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @classmethod
    def of(cls, source: Spend) -> dict[str, int | float]:
        """The spend fields of ``source`` (a trajectory, say), to copy onto a result."""
        return {name: getattr(source, name) for name in Spend.model_fields}

    def count(self, done: Completion) -> None:
        """Add one completion's tokens and dollars."""
        self.prompt_tokens += done.usage.prompt_tokens
        self.cached_tokens += done.usage.cached_tokens
        self.completion_tokens += done.usage.completion_tokens
        self.cost_usd += done.cost_usd


HarnessStop = Literal["budget", "timeout", "output_flood", "crashed"]


class HarnessRun(BaseModel):
    """What an installed agent harness (Codex CLI, Claude Code, mini-swe-agent, ...) did in
    the sandbox, beside the turns the gateway recorded: how it ended and where time went."""

    name: str
    version: str
    exit_code: int | None = None  # None: it never exited on its own (stopped by us)
    stopped: HarnessStop | None = None  # why we stopped it; "crashed": it could not run
    log: str = ""  # its output and its own log file(s), a capped tail
    wall_s: float = 0.0  # from its start to its end
    model_s: float = 0.0  # of which the gateway spent waiting on the model (sandbox frozen)
    harness_s: float = 0.0  # of which the harness ran (wall_s - model_s)


class Trajectory(Spend):
    """An episode as RL code and reports consume it; round-trips through JSON.

    ``messages`` are exactly as sent; each turn keeps its completion (usage, cost, retries,
    route, token ids and logprobs when the endpoint returned them) and tool results (full
    output, exit code, duration). ``queued_s`` is time spent waiting on rate limits and
    backoff, which ``working_s`` leaves out."""

    task_id: str
    messages: list[dict[str, Any]]
    turns: list[Turn] = []
    stop_reason: StopReason | None = None
    reasoning_tokens: int = 0
    retries: int = 0
    wall_s: float = 0.0
    paused_s: float = 0.0
    queued_s: float = 0.0
    score: Score | None = None  # set by the verifier after the episode
    error: str | None = None  # the infrastructure failed under the episode (RL: no reward)
    group_id: str | None = None  # rollouts of one group (forked from one prepared sandbox)
    advantage: float | None = None  # (r - mean) / (std + eps) within the group
    advantage_centered: float | None = None  # r - mean within the group
    harness: HarnessRun | None = None  # set when an installed harness, not the loop, ran it

    def to_concat(self) -> TokenSequence:
        """The episode as one token sequence with a loss mask over sampled tokens only,
        logprobs and per-token policy versions; raises :class:`NoTokens` when it cannot."""
        return _to_concat(self)

    def to_messages(self) -> list[dict[str, Any]]:
        """The messages as sent, for SFT."""
        return [dict(m) for m in self.messages]

    @property
    def reward(self) -> float | None:
        """The verifier's reward, if the episode was verified and the verifier worked."""
        if self.error is not None or self.score is None or self.score.error is not None:
            return None
        return self.score.reward

    @property
    def working_s(self) -> float:
        """Wall time minus time waiting on rate limits and retry backoff."""
        return max(0.0, self.wall_s - self.queued_s)

    @property
    def cache_hit_rate(self) -> float:
        """Share of prompt tokens served from the provider's prefix cache."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class TokenSequence(BaseModel):
    """A whole episode as tokens. ``loss_mask`` is 1 on tokens the policy sampled and 0 on
    everything else (system, user, tool output); ``logprobs`` and ``policy_versions`` are
    meaningful where the mask is 1."""

    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    policy_versions: list[int | str | None]
    reward: float | None = None


class NoTokens(ValueError):
    """The trajectory cannot be exported as tokens (see the message for why)."""


def _to_concat(traj: Trajectory) -> TokenSequence:
    """Concatenate every turn's new prompt tokens (mask 0) and sampled tokens (mask 1).
    Needs an endpoint that returns token ids (self-hosted vLLM/SGLang, or the local server)
    and prompts that extend each other token for token."""
    out = TokenSequence(token_ids=[], loss_mask=[], logprobs=[], policy_versions=[])
    for i, turn in enumerate(traj.turns):
        c = turn.completion
        if c.prompt_token_ids is None or c.token_ids is None:
            raise NoTokens(
                f"turn {i} has no token ids: the endpoint did not return them (ask a "
                "self-hosted server; the hosted API never does)"
            )
        prompt = c.prompt_token_ids
        if prompt[: len(out.token_ids)] != out.token_ids:
            raise NoTokens(
                f"turn {i}'s prompt does not extend the tokens before it: the server "
                "re-tokenized the history, so a concatenation would not be what was sampled"
            )
        new = prompt[len(out.token_ids) :]
        out.token_ids += new
        out.loss_mask += [0] * len(new)
        out.logprobs += [0.0] * len(new)
        out.policy_versions += [None] * len(new)
        if c.logprobs is not None and len(c.logprobs) != len(c.token_ids):
            raise NoTokens(
                f"turn {i} has {len(c.token_ids)} token ids but {len(c.logprobs)} logprobs"
            )
        logprobs = c.logprobs
        out.token_ids += c.token_ids
        out.loss_mask += [1] * len(c.token_ids)
        out.logprobs += logprobs or [0.0] * len(c.token_ids)
        out.policy_versions += [turn.policy_version] * len(c.token_ids)
    out.reward = traj.reward
    return out
