"""Endpoints and what each model accepts: presets (``kimi-k3``), any OpenAI-compatible URL,
and a capability table that shapes every request, instead of special cases in the client.

Per ``K3_PROTOCOL.md``: K3 always thinks, accepts ``reasoning_effort`` only as ``"max"``,
rejects sampling parameters, is safe only with ``tool_choice`` ``"auto"``/``"none"``, and the
hosted API answers 400 to vLLM-only fields, which self-hosted servers accept.

Prices: the ``kimi-k3`` preset, and a URL on Moonshot's own API hosts, cost K3's list price;
any other URL is self-hosted (vLLM, SGLang, the local server: loopback, a private address or
anyone's machine that is not Moonshot's) and costs nothing unless its spec says otherwise. A
spec sets prices in its URL fragment, which is never sent to the server, in dollars per
million tokens; an omitted one is 0: ``http://gpu1:8000/v1#input=0.6&cached_input=0.1&output=2.5``.
"""

from __future__ import annotations

import os
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

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
    price: Price = Price(input=0.0, cached_input=0.0, output=0.0)  # $ per million tokens
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


# Moonshot's own API: a URL here is the hosted K3 (list price, its key, no vLLM-only fields)
OFFICIAL_HOSTS = frozenset({"api.moonshot.ai", "api.moonshot.cn"})
FREE = Price(input=0.0, cached_input=0.0, output=0.0)


def parse_price(spec: str) -> Price | None:
    """The price ``spec``'s fragment sets (``#input=…&cached_input=…&output=…``, dollars
    per million tokens, omitted ones 0), or ``None`` without a fragment."""
    _, hash_, fragment = spec.partition("#")
    if not hash_:
        return None
    values: dict[str, float] = {}
    for key, text in parse_qsl(fragment, keep_blank_values=True):
        if key not in Price.model_fields:
            allowed = ", ".join(Price.model_fields)
            raise ValueError(f"model {spec!r}: unknown price {key!r} after '#' (use {allowed})")
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not value >= 0.0:  # also refuses nan
            raise ValueError(
                f"model {spec!r}: price {key}={text!r} is not a number of dollars >= 0"
            )
        values[key] = value
    if not values:
        raise ValueError(f"model {spec!r}: nothing after '#' (e.g. #input=3&output=15)")
    return Price(**{**FREE.model_dump(), **values})


def resolve_endpoint(spec: str, *, model: str = "kimi-k3") -> Endpoint:
    """``kimi-k3`` (or another preset name), or the base URL of any OpenAI-compatible
    server. A URL on Moonshot's API hosts is the ``kimi-k3`` preset at that URL; any other
    is taken as self-hosted (vLLM, SGLang, the local K3 server) serving ``model`` with K3's
    capabilities plus the self-hosted-only fields, and free. Either may set its price in a
    ``#input=…&cached_input=…&output=…`` fragment (see the module's docstring)."""
    base = spec.partition("#")[0]
    price = parse_price(spec)
    if base in PRESETS:
        preset = PRESETS[base]
        return preset if price is None else preset.model_copy(update={"price": price})
    if base.startswith(("http://", "https://")):
        url = base.rstrip("/")
        if (urlsplit(url).hostname or "").lower() in OFFICIAL_HOSTS:
            preset = PRESETS["kimi-k3"]
            return preset.model_copy(
                update={"name": url, "base_url": url, "price": price or preset.price}
            )
        caps = K3_CAPABILITIES.model_copy(update={"vllm_fields": True})
        return Endpoint(
            name=url,
            base_url=url,
            model=model,
            price=price or FREE,
            capabilities=caps,
            hosted=False,
        )
    known = ", ".join(sorted(PRESETS))
    raise ValueError(f"unknown model {spec!r}: use one of {known}, or an http(s):// base URL")
