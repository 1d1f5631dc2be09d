"""Endpoint presets and the capability table shape requests; a self-hosted URL (here the
local K3 server) works end to end through the same client, free unless its spec sets a
price; Moonshot's own API host costs K3's list price."""

from __future__ import annotations

import pytest

from agentenv.model import OpenAIChatModel, resolve_endpoint
from agentenv.model.types import K3_PRICE, Price
from agentenv.testing import K3Server, ScriptedTurn

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]


def test_kimi_k3_preset() -> None:
    k3 = resolve_endpoint("kimi-k3")
    assert k3.base_url == "https://api.moonshot.ai/v1"
    assert k3.api_key_env == "MOONSHOT_API_KEY"
    assert k3.hosted and not k3.capabilities.vllm_fields
    assert k3.capabilities.context_window == 1_048_576
    assert (k3.price.input, k3.price.cached_input, k3.price.output) == (3.00, 0.30, 15.00)


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOONSHOT_API_KEY", raising=False)
    with pytest.raises(KeyError, match="MOONSHOT_API_KEY"):
        OpenAIChatModel.for_endpoint(resolve_endpoint("kimi-k3"))


def test_capabilities_shape_the_request() -> None:
    k3 = resolve_endpoint("kimi-k3")
    assert k3.request_options(reasoning_effort="max") == {"reasoning_effort": "max"}
    with pytest.raises(ValueError, match="allowed: max"):
        k3.request_options(reasoning_effort="low")
    # thinking models are only safe with auto/none: a named choice becomes auto
    assert k3.request_options(tool_choice="required") == {"tool_choice": "auto"}
    assert k3.request_options(tool_choice="none") == {"tool_choice": "none"}


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'gpt-99'.*kimi-k3"):
        resolve_endpoint("gpt-99")


async def test_self_hosted_url_works_end_to_end_and_is_free_unless_priced() -> None:
    turns = [ScriptedTurn(reasoning="r", content="from the local server")] * 2
    with K3Server(turns) as server:
        endpoint = resolve_endpoint(server.base_url)
        assert not endpoint.hosted and endpoint.capabilities.vllm_fields
        priced = resolve_endpoint(f"{server.base_url}#input=2&output=8")
        assert priced.base_url == endpoint.base_url == server.base_url  # the fragment is ours
        costs = []
        for ep in (endpoint, priced):
            chat = OpenAIChatModel.for_endpoint(ep, reasoning_effort="max", tool_choice="required")
            try:
                done = await chat.complete([{"role": "user", "content": "hi"}])
            finally:
                await chat.aclose()
            assert done.content == "from the local server"
            costs.append((done.cost_usd, done.usage))
        sent = server.requests[-1]
    assert costs[0][0] == 0.0  # self-hosted: no list price
    usage = costs[1][1]
    # cached input is priced 0 here (omitted from the fragment)
    expected = ((usage.prompt_tokens - usage.cached_tokens) * 2 + usage.completion_tokens * 8) / 1e6
    assert costs[1][0] == pytest.approx(expected) and expected > 0
    assert sent["reasoning_effort"] == "max"
    assert sent["tool_choice"] == "auto"  # adjusted by the capability table


def test_prices_per_endpoint() -> None:
    # Moonshot's own host is the hosted K3 whatever the URL's spelling: list price, its key
    official = resolve_endpoint("https://api.moonshot.ai/v1/")
    assert official.price == K3_PRICE and official.hosted and not official.capabilities.vllm_fields
    assert official.api_key_env == "MOONSHOT_API_KEY"
    assert official.base_url == "https://api.moonshot.ai/v1"
    for url in ("http://127.0.0.1:8000/v1", "http://10.1.2.3/v1", "https://gpu.example.org/v1"):
        assert resolve_endpoint(url).price == Price(input=0, cached_input=0, output=0)
    assert resolve_endpoint("kimi-k3#input=1&cached_input=0.1&output=4").price == Price(
        input=1, cached_input=0.1, output=4
    )
    assert resolve_endpoint("kimi-k3").price == K3_PRICE  # the preset itself is unchanged
    for bad, why in (
        ("http://h/v1#inptu=1", "unknown price 'inptu'"),
        ("http://h/v1#input=-1", "input='-1' is not a number"),
        ("http://h/v1#input=abc", "input='abc' is not a number"),
        ("http://h/v1#", "nothing after '#'"),
    ):
        with pytest.raises(ValueError, match=why):
            resolve_endpoint(bad)
