"""What trainers take from a trajectory: one token sequence with a loss mask over the sampled
tokens only, their logprobs and the policy version of each, or plain messages for SFT."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from agentenv.agent.loop import Trajectory


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


def to_concat(traj: Trajectory) -> TokenSequence:
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


def to_messages(traj: Trajectory) -> list[dict[str, Any]]:
    """The conversation as sent, for SFT data (reasoning kept on assistant turns)."""
    return [dict(m) for m in traj.messages]
