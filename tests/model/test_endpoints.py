"""Endpoint presets and the capability table shape requests; a self-hosted URL (here the
local K3 server) works end to end through the same client."""

from __future__ import annotations

import pytest

from agentenv.model import K3Server, OpenAIChatModel, ScriptedTurn, resolve_endpoint

pytestmark = pytest.mark.anyio


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


async def test_self_hosted_url_works_end_to_end() -> None:
    with K3Server([ScriptedTurn(reasoning="r", content="from the local server")]) as server:
        endpoint = resolve_endpoint(server.base_url)
        assert not endpoint.hosted and endpoint.capabilities.vllm_fields
        chat = OpenAIChatModel.for_endpoint(
            endpoint, reasoning_effort="max", tool_choice="required"
        )
        try:
            done = await chat.complete([{"role": "user", "content": "hi"}])
        finally:
            await chat.aclose()
        sent = server.requests[-1]
    assert done.content == "from the local server"
    assert done.cost_usd > 0
    assert sent["reasoning_effort"] == "max"
    assert sent["tool_choice"] == "auto"  # adjusted by the capability table
