"""An OpenAI-compatible chat model on the ``openai`` SDK's async client, always streaming.

It assembles K3's stream as ``K3_PROTOCOL.md`` describes: ``reasoning_content`` deltas (or
``reasoning``), content, and tool calls keyed by index (id and name once, arguments in
fragments); usage from the last chunk(s), cached tokens from either place they appear.
The SDK's own retries are off: retrying is the caller's policy, in one place.
"""

from __future__ import annotations

import email.utils
import inspect
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
)

from agentenv.errors import (
    AuthError,
    BadRequest,
    ContextOverflow,
    EndpointUnavailable,
    MalformedAnswer,
    ModelError,
    RateLimited,
    StreamCut,
)
from agentenv.log import get_logger
from agentenv.model import wire
from agentenv.model.breaker import Breaker
from agentenv.model.endpoints import Endpoint
from agentenv.model.limit import AdaptiveLimit
from agentenv.model.probe import Health, probe
from agentenv.model.types import K3_PRICE, Completion, Price, StreamEvent, ToolCall, Usage

EventCallback = Callable[[StreamEvent], Awaitable[None] | None]
log = get_logger(__name__)

_OVERFLOW = ("exceeded model token limit", "input token length too long", "maximum context length")


def model_error(error: BaseException) -> ModelError | None:
    """Our kind of an error raised by the ``openai`` SDK or its HTTP layer (``None`` for
    anything else). Transient ones (rate limits, server errors, timeouts, dropped
    connections) are :class:`EndpointUnavailable`, retried; never a 400 (the request is
    wrong) or a 401/403 (the account is): retrying cannot help those."""
    import openai

    text, status = str(error), getattr(error, "status_code", None)
    if isinstance(error, openai.RateLimitError):
        return RateLimited(text, status_code=status, retry_after_s=retry_after_s(error))
    if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
        return AuthError(text, status_code=status)
    if isinstance(error, openai.InternalServerError):
        return EndpointUnavailable(text, status_code=status, retry_after_s=retry_after_s(error))
    if isinstance(error, openai.APIStatusError):  # 400, 404, 409, 422: the request is wrong
        if any(marker in text.lower() for marker in _OVERFLOW):
            return ContextOverflow(text, status_code=status)
        return BadRequest(text, status_code=status)
    if isinstance(error, openai.APIError) or _from_http_layer(error):  # timeouts, connections
        why = wire.nobody_there(error)
        if why is not None and why.startswith("not HTTP"):
            return MalformedAnswer(f"the endpoint answered {why}", status_code=status)
        return EndpointUnavailable(wire.cause_text(error), status_code=status)
    return None


def _from_http_layer(error: BaseException) -> bool:
    # A connection dropped mid-stream can come out of the SDK's HTTP layer unwrapped; which
    # library that is varies by SDK version (httpx, httpx2), so it is told by its module.
    return type(error).__module__.split(".")[0].startswith(("httpx", "httpcore"))


def retry_after_s(error: BaseException) -> float | None:
    """The server's own wait hint on a 429/503: ``retry-after-ms``, ``Retry-After`` (seconds
    or an HTTP date) or ``X-RateLimit-Reset`` (seconds)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            value = headers["retry-after"]
            try:
                return float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                return max(0.0, when.timestamp() - time.time())
        if "x-ratelimit-reset" in headers:
            return float(headers["x-ratelimit-reset"])
    except (TypeError, ValueError):
        return None
    return None


class OpenAIChatModel:
    """A chat model at an OpenAI-compatible endpoint (Moonshot's API, vLLM, SGLang, or the
    local :class:`~agentenv.testing.k3server.K3Server`).

    Share one instance between the episodes of a job: its :class:`AdaptiveLimit` bounds the
    requests in flight to the endpoint. ``token_ids`` asks for token ids and logprobs with
    vLLM's fields, which only self-hosted servers accept.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str = "kimi-k3",
        price: Price = K3_PRICE,
        max_completion_tokens: int = 32_768,
        timeout_s: float = 600.0,
        extra_body: dict[str, Any] | None = None,
        max_attempts: int = 6,
        rate_limit_wait_s: float = 600.0,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        limit: AdaptiveLimit | None = None,
        token_ids: bool = False,
        http_client: Any = None,
        breaker: Breaker | None = None,
    ):
        self.model = model
        self.base_url = base_url
        self.breaker = breaker or Breaker(base_url)
        self.failed_requests = 0  # every failed attempt, retried or not (progress shows it)
        self.limit = limit or AdaptiveLimit()
        self.token_ids = token_ids
        self.price = price
        self.max_completion_tokens = max_completion_tokens
        self.extra_body = extra_body or {}
        self.max_attempts = max_attempts
        self.rate_limit_wait_s = rate_limit_wait_s
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        from openai import AsyncOpenAI, AsyncStream, DefaultAsyncHttpxClient  # slow to load

        # chunks as the JSON objects they decode to (see _complete_once)
        self._stream_cls = AsyncStream[object]

        # the first bytes of every answer are kept, for errors that quote them
        http_client = http_client or DefaultAsyncHttpxClient()
        wire.install(http_client)
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            max_retries=0,
            timeout=timeout_s,
            # the SDK's own kind of client (openai.DefaultAsyncHttpxClient), e.g.
            # K3Server.http_client(): tests without a socket
            http_client=http_client,
        )

    @classmethod
    def for_endpoint(
        cls,
        endpoint: Endpoint,
        *,
        reasoning_effort: str | None = None,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> OpenAIChatModel:
        """A client for a preset or self-hosted endpoint (see :mod:`agentenv.model.endpoints`),
        its request fields shaped by the endpoint's capability table; raises ``KeyError``
        naming the variable when the endpoint's API key is not set."""
        options = endpoint.request_options(
            reasoning_effort=reasoning_effort, tool_choice=tool_choice
        )
        return cls(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key(),
            model=endpoint.model,
            price=endpoint.price,
            extra_body=options or None,
            token_ids=endpoint.capabilities.vllm_fields,
            **kwargs,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def probe(self, *, timeout_s: float = 10.0) -> Health:
        """Ask the endpoint for its models once (no tokens spent): whether anybody is there
        and speaks the API. A dead endpoint's breaker opens at once, so that requests to it
        fail without waiting (see :mod:`agentenv.model.probe`)."""
        health = await probe(self._client, self.base_url, timeout_s=timeout_s)
        if not health.up and not health.auth_refused:
            self.breaker.trip(health.detail)
        return health

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> Completion:
        """Stream one assistant turn and return it assembled, with usage, cost and the number
        of retries it took. Transient failures are retried with capped, jittered exponential
        backoff, ``max_attempts`` times, then raised as :class:`EndpointUnavailable` (or
        :class:`StreamCut`); rate limits are waited out as the server asks (``Retry-After``)
        for up to ``rate_limit_wait_s``, then raised as :class:`RateLimited`: a storm of 429s
        is the endpoint saying "later", not "down". A context overflow raises
        :class:`ContextOverflow`, other refusals :class:`BadRequest` or :class:`AuthError` at
        once. Only :class:`ModelError` kinds come out, never the SDK's."""
        failures = 0  # those that are not rate limits
        waited = 0.0  # on rate limits: the budget is time waited, not time streaming
        planned: list[float] = []  # a rate limit's wait, decided (and counted) by stop()

        def stop(state: RetryCallState) -> bool:
            nonlocal failures, waited
            if self.breaker.open:  # nobody there: waiting longer will not change that
                return True
            error = state.outcome.exception() if state.outcome else None
            if isinstance(error, RateLimited):
                wait = self._wait(state)
                if waited + wait > self.rate_limit_wait_s:  # told to wait past the budget
                    return True
                waited += wait
                planned.append(wait)
                return False
            failures += 1
            return failures >= self.max_attempts

        def wait(state: RetryCallState) -> float:
            return planned.pop() if planned else self._wait(state)

        attempts = AsyncRetrying(
            retry=retry_if_exception_type(EndpointUnavailable),  # rate limits, cut streams too
            stop=stop,
            wait=wait,
            before_sleep=_log_retry,
            reraise=True,
        )
        self.breaker.check()  # known dead: fail now, not after minutes of backoff
        retries = -1
        started, working = time.monotonic(), 0.0
        async for attempt in attempts:
            with attempt:
                retries += 1
                async with self.limit.slot() as generation:
                    t0 = time.monotonic()
                    try:
                        done = await self._complete_once(messages, tools, on_event)
                    except Exception as e:
                        mapped = e if isinstance(e, ModelError) else model_error(e)
                        if mapped is None:
                            raise
                        self.failed_requests += 1
                        why = wire.nobody_there(e)
                        if why is None and isinstance(mapped, MalformedAnswer):
                            why = str(mapped)
                        if why is not None:
                            self.breaker.failed(why)
                        if isinstance(mapped, RateLimited):
                            self.limit.rate_limited(generation)
                        if mapped is e:
                            raise
                        raise mapped from e
                    finally:
                        working += time.monotonic() - t0
                self.limit.succeeded()
                self.breaker.succeeded()
        done.retries = retries
        done.queued_s = max(0.0, time.monotonic() - started - working)
        return done

    def _wait(self, state: RetryCallState) -> float:
        # Capped exponential backoff with jitter, but never less than the server asked for;
        # a rate limit with a hint waits what it asks (backing off further would only leave
        # the episode idle after the storm), jittered so that episodes do not come back at once.
        jitter = random.uniform(0, self._backoff_initial_s)
        error = state.outcome.exception() if state.outcome else None
        hint = getattr(error, "retry_after_s", None)
        exponent = min(state.attempt_number - 1, 30)
        if isinstance(error, RateLimited) and hint is not None:
            # "Retry-After: 0" must not become a request a second: at least a short backoff
            floor = min(self._backoff_initial_s * 2.0**exponent, 10.0)
            return max(float(hint), floor) + jitter
        backoff = min(self._backoff_max_s, self._backoff_initial_s * 2.0**exponent) + jitter
        return max(backoff, hint) if hint is not None else backoff

    async def _complete_once(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        on_event: EventCallback | None,
    ) -> Completion:
        started = time.monotonic()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": self.max_completion_tokens,
        }
        if tools:
            body["tools"] = tools
        if self.token_ids:
            # vLLM's fields: the hosted API answers 400 to them, so only self-hosted get them
            body["logprobs"] = True
            body["return_token_ids"] = True
        body.update(self.extra_body)  # as the SDK's extra_body: merged last, over the fields
        stream = await self._client.post(
            "/chat/completions",
            body=body,
            # the SDK's transport (auth, base URL, timeouts, its errors, the SSE decoder and
            # the error events in a stream) without its typed layers: the body goes as it
            # is (the typed create() walks every message to transform it) and each chunk
            # comes back as the plain JSON object it decodes to (cast to ``object``), not a
            # ChatCompletionChunk model built field by field. Together those were most of
            # a call's own time (bench/gateway.py, where a gateway makes a second call).
            cast_to=object,
            options={"security": {"bearer_auth": True}},
            stream=True,
            stream_cls=self._stream_cls,
        )
        out = Completion(model=self.model, message_form="k3")  # K3's history form
        calls: dict[int, ToolCall] = {}
        usage: Any = None
        token_ids: list[int] = []
        logprobs: list[float] = []
        seen = 0  # chunks

        async def emit(event: StreamEvent) -> None:
            if on_event is not None:
                maybe = on_event(event)
                if inspect.isawaitable(maybe):
                    await maybe

        async for chunk in _chunks(stream, self.base_url):
            seen += 1
            events: list[StreamEvent] = []
            try:  # the chunk's shape is the endpoint's; a wrong one is its error, not ours
                usage = self._take(chunk, out, calls, usage, token_ids, logprobs, events, started)
            except (AttributeError, TypeError, KeyError, ValueError) as e:
                raise MalformedAnswer(
                    f"{self.base_url} sent a chunk of the wrong shape ({type(e).__name__}: {e}): "
                    f"{wire.describe(stream.response)}"
                ) from e
            for event in events:
                await emit(event)
        if out.finish_reason is None:
            if not seen:  # not one chunk: this is not a chat-completions stream
                raise MalformedAnswer(
                    f"{self.base_url} answered without a stream of chat-completion chunks: "
                    f"{wire.describe(stream.response)}"
                )
            raise StreamCut(f"stream of {out.response_id} ended without a finish reason")
        out.tool_calls = [calls[i] for i in sorted(calls)]
        out.token_ids = token_ids or None
        out.logprobs = logprobs or None
        for call in out.tool_calls:
            await emit(StreamEvent(kind="tool_call_finished", tool_call=call))
        try:
            out.usage = _usage(usage)
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            raise MalformedAnswer(f"{self.base_url} sent usage of the wrong shape: {e}") from e
        out.cost_usd = self.price.cost(out.usage)
        out.latency_s = time.monotonic() - started
        await emit(StreamEvent(kind="usage", usage=out.usage))
        return out

    @staticmethod
    def _take(
        chunk: dict[str, Any],
        out: Completion,
        calls: dict[int, ToolCall],
        usage: Any,
        token_ids: list[int],
        logprobs: list[float],
        events: list[StreamEvent],
        started: float,
    ) -> Any:
        """Fold one chunk (its decoded JSON) into ``out`` (and ``calls``, ``token_ids``,
        ``logprobs``), adding the events to emit to ``events``; returns the usage seen so
        far. A field missing reads as ``None`` (as the SDK's models read it, leniently); a
        value of another type raises ``TypeError`` or ``AttributeError``, which the caller
        reports as the endpoint's malformed answer."""
        out.response_id = out.response_id or chunk.get("id")
        usage = chunk.get("usage") or usage  # a repeated trailing usage chunk: keep the last
        prompt_ids = chunk.get("prompt_token_ids")
        if prompt_ids:
            out.prompt_token_ids = list(prompt_ids)
        for choice in chunk["choices"]:
            usage = choice.get("usage") or usage
            token_ids.extend(choice.get("token_ids") or ())
            lp = choice.get("logprobs")
            if lp is not None and lp.get("content"):
                logprobs.extend(t.get("logprob") for t in lp["content"])
            delta = choice.get("delta")
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            content = delta.get("content")
            tool_calls = delta.get("tool_calls")
            if reasoning or content or tool_calls:
                out.ttft_s = out.ttft_s if out.ttft_s is not None else time.monotonic() - started
            if reasoning:
                out.reasoning_content += reasoning
                events.append(StreamEvent(kind="reasoning", text=reasoning))
            if content:
                out.content += content
                events.append(StreamEvent(kind="content", text=content))
            for tc in tool_calls or ():
                index, fn = tc.get("index"), tc.get("function")
                call = calls.get(index)
                if call is None:
                    call = calls[index] = ToolCall(
                        id=tc.get("id") or "", name=(fn.get("name") if fn else None) or ""
                    )
                    events.append(StreamEvent(kind="tool_call_started", tool_call=call))
                if tc.get("id") and not call.id:
                    call.id = tc["id"]
                if fn is not None:
                    if fn.get("name") and not call.name:
                        call.name = fn["name"]
                    call.arguments += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
        return usage


async def _chunks(stream: Any, url: str) -> AsyncIterator[dict[str, Any]]:
    """The chunks of ``stream``, each the JSON object it decodes to; what does not decode as
    a stream of JSON objects with a list of choices (bytes that are not UTF-8, lines that
    are not JSON, another shape) is a :class:`MalformedAnswer` quoting the first line that
    came back."""
    chunks = stream.__aiter__()
    while True:
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            return
        except (UnicodeDecodeError, ValueError) as e:  # the SDK decodes each event as JSON
            raise MalformedAnswer(
                f"{url} sent what is not a stream of JSON chunks ({type(e).__name__}: {e}): "
                f"{wire.describe(stream.response)}"
            ) from e
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            raise MalformedAnswer(
                f"{url} sent a chunk without a list of choices: {wire.describe(stream.response)}"
            )
        yield chunk


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    log.warning(
        "model.retry", attempt=state.attempt_number, error=f"{type(error).__name__}: {error}"
    )


def _usage(raw: Any) -> Usage:
    """The usage object of a stream (its decoded JSON), cached tokens from either place
    K3 puts them."""
    if raw is None:
        return Usage()
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = raw.get("cached_tokens")
    out_details = raw.get("completion_tokens_details")
    reasoning = out_details.get("reasoning_tokens") if isinstance(out_details, dict) else None
    return Usage(
        prompt_tokens=raw.get("prompt_tokens") or 0,
        cached_tokens=cached or 0,
        completion_tokens=raw.get("completion_tokens") or 0,
        reasoning_tokens=reasoning or 0,
    )
