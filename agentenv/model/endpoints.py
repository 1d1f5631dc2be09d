"""Endpoints and what each model accepts: presets (``kimi-k3``), any OpenAI-compatible URL,
and a capability table that shapes every request, instead of special cases in the client.

Per ``K3_PROTOCOL.md``: K3 always thinks, accepts ``reasoning_effort`` only as ``"max"``,
rejects sampling parameters, is safe only with ``tool_choice`` ``"auto"``/``"none"``, and the
hosted API answers 400 to vLLM-only fields, which self-hosted servers accept.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel

from agentenv.model.types import K3_PRICE, Price


class Capabilities(BaseModel):
    """What a model accepts."""

    thinking: Literal["always", "toggle", "never"] = "never"
    reasoning_efforts: tuple[str, ...] = ()
    fixed_sampling: bool = False  # temperature, top_p, penalties and n > 1 are refused
    tool_choices: tuple[str, ...] = ("auto", "none", "required")
    vllm_fields: bool = False  # return_token_ids, logprobs with token ids
    context_window: int = 128_000


class Endpoint(BaseModel):
    """Where a model is served and how to talk to it."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    price: Price = Price(input=0.0, cached_input=0.0, output=0.0)
    capabilities: Capabilities = Capabilities()
    hosted: bool = False  # a third party's API: `sensitive` tasks never go there

    def api_key(self) -> str:
        """The key from the environment; self-hosted endpoints without one get a dummy."""
        if self.api_key_env is None:
            return "none"
        key = os.environ.get(self.api_key_env)
        if not key:
            raise KeyError(
                f"endpoint {self.name!r} needs an API key in ${self.api_key_env}; set it, or "
                "point --model at a self-hosted URL or the local server (agentenv serve-model)"
            )
        return key

    def request_options(
        self, *, reasoning_effort: str | None = None, tool_choice: str | None = None
    ) -> dict[str, Any]:
        """Request fields for this model, adjusted to what it accepts: a named tool choice
        that thinking models cannot take becomes ``"auto"``; an effort it does not know is an
        error, not a silent 400 from the server."""
        caps = self.capabilities
        options: dict[str, Any] = {}
        if reasoning_effort is not None:
            if reasoning_effort not in caps.reasoning_efforts:
                allowed = ", ".join(caps.reasoning_efforts) or "none"
                raise ValueError(
                    f"{self.model} does not take reasoning_effort={reasoning_effort!r} "
                    f"(allowed: {allowed})"
                )
            options["reasoning_effort"] = reasoning_effort
        if tool_choice is not None:
            options["tool_choice"] = tool_choice if tool_choice in caps.tool_choices else "auto"
        return options


K3_CAPABILITIES = Capabilities(
    thinking="always",
    reasoning_efforts=("max",),
    fixed_sampling=True,
    tool_choices=("auto", "none"),
    vllm_fields=False,
    context_window=1_048_576,
)

PRESETS: dict[str, Endpoint] = {
    "kimi-k3": Endpoint(
        name="kimi-k3",
        base_url="https://api.moonshot.ai/v1",
        model="kimi-k3",
        api_key_env="MOONSHOT_API_KEY",
        price=K3_PRICE,
        capabilities=K3_CAPABILITIES,
        hosted=True,
    ),
}


def resolve_endpoint(spec: str, *, model: str = "kimi-k3") -> Endpoint:
    """``kimi-k3`` (or another preset name), or the base URL of any OpenAI-compatible
    server, taken as self-hosted (vLLM, SGLang, the local K3 server) serving ``model`` with
    K3's capabilities plus the self-hosted-only fields."""
    if spec in PRESETS:
        return PRESETS[spec]
    if spec.startswith(("http://", "https://")):
        caps = K3_CAPABILITIES.model_copy(update={"vllm_fields": True})
        return Endpoint(
            name=spec,
            base_url=spec.rstrip("/"),
            model=model,
            price=K3_PRICE,
            capabilities=caps,
            hosted=False,
        )
    known = ", ".join(sorted(PRESETS))
    raise ValueError(f"unknown model {spec!r}: use one of {known}, or an http(s):// base URL")
