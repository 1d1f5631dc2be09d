"""Plain data at the model seam: usage, prices, tool calls, a completed turn, stream events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel


class Usage(BaseModel):
    """Tokens of one request. ``cached_tokens`` is the part of ``prompt_tokens`` served from
    the provider's prefix cache; ``reasoning_tokens`` is part of ``completion_tokens``."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0


class Price(BaseModel):
    """Dollars per million tokens. Prices are data, not code."""

    input: float
    cached_input: float
    output: float

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs: uncached input, cached input and output (reasoning included)."""
        uncached = max(0, usage.prompt_tokens - usage.cached_tokens)
        return (
            uncached * self.input
            + usage.cached_tokens * self.cached_input
            + usage.completion_tokens * self.output
        ) / 1e6


K3_PRICE = Price(input=3.00, cached_input=0.30, output=15.00)


class ToolCall(BaseModel):
    """One tool call as the model made it; ``arguments`` is the raw JSON text, which may be
    malformed (the loop reports that back to the model)."""

    id: str
    name: str
    arguments: str = ""

    def as_message(self) -> dict[str, Any]:
        """The call as an assistant message's ``tool_calls`` entry."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


class Route(BaseModel):
    """Which endpoint answered a turn, and why: the rule that allowed it, and the endpoints
    that were down and fallen back from."""

    endpoint: str
    reason: str
    fell_back_from: list[str] = []


EMPTY_CONTENT = "(calling tools)"  # K3 rejects an assistant message with empty content


class Completion(BaseModel):
    """One assistant turn, assembled from the stream. ``queued_s`` is time spent waiting
    for a concurrency slot or backing off between retries (not the model's working time).
    ``token_ids``, ``prompt_token_ids`` and ``logprobs`` are set only by endpoints that return
    them (self-hosted vLLM/SGLang)."""

    content: str = ""
    reasoning_content: str = ""
    tool_calls: list[ToolCall] = []
    finish_reason: str | None = None
    usage: Usage = Usage()
    cost_usd: float = 0.0
    ttft_s: float | None = None
    latency_s: float = 0.0
    response_id: str | None = None
    model: str | None = None
    retries: int = 0
    queued_s: float = 0.0
    route: Route | None = None
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    # How this turn goes back into the history, as its provider wants it: "k3" keeps
    # reasoning_content and never sends empty content; "openai" is the plain form.
    message_form: Literal["openai", "k3"] = "openai"

    def history_message(self) -> dict[str, Any]:
        """The assistant message for the conversation's history, in :attr:`message_form`.
        K3's replays ``reasoning_content`` exactly (a tool-call turn without it is a 400 with
        thinking on, and a byte-identical prefix is what the cache serves) and never has
        empty content."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.message_form == "k3":
            message["content"] = self.content or EMPTY_CONTENT
            message["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            message["tool_calls"] = [call.as_message() for call in self.tool_calls]
        return message


class StreamEvent(BaseModel):
    """Something that happened while a completion streamed; renderers and RL code subscribe
    to the same events."""

    kind: Literal["reasoning", "content", "tool_call_started", "tool_call_finished", "usage"]
    text: str = ""
    tool_call: ToolCall | None = None
    usage: Usage | None = None


class ChatModel(Protocol):
    """Anything that completes a conversation: the OpenAI-compatible client, a router, a
    scripted policy. The agent loop only knows this."""

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: Callable[[StreamEvent], Awaitable[None] | None] | None = None,
    ) -> Completion:
        """One assistant turn."""
        ...
