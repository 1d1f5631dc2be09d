"""The client reads each streamed chunk as the JSON it is, not the SDK's typed models, and
sends its request body as it is: what other OpenAI-compatible servers put in a stream
(``reasoning`` for ``reasoning_content``, nulls for absent fields, a tool call's id after
its first fragment, usage inside the choice, cached tokens at the top level) assembles as
K3's does; an error event inside a stream is an endpoint error; a chunk missing what the
wire format requires is a malformed answer quoting it, never a crash. A real HTTP server
on loopback sends the exact bytes; the real client reads them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentenv.errors import EndpointUnavailable, MalformedAnswer
from agentenv.model import OpenAIChatModel
from agentenv.model.types import StreamEvent

pytestmark = [pytest.mark.anyio, pytest.mark.no_docker]


class Wire:
    """A chat-completions endpoint on 127.0.0.1 that streams ``events`` (each a ``data:``
    payload, sent as given) then ``[DONE]``, and keeps every request's headers and body."""

    def __init__(self, events: list[str]):
        self.events = events
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        wire = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                wire.requests.append((headers, json.loads(raw)))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for data in [*wire.events, "[DONE]"]:
                    self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Wire:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def chunk(delta: dict[str, Any] | None = None, **fields: Any) -> str:
    """One chunk's JSON: a single choice with ``delta`` (and ``fields`` on the choice), or
    just the top-level ``fields`` when ``delta`` is ``None``."""
    body: dict[str, Any] = {"id": "cmpl-7", "object": "chat.completion.chunk", "created": 1}
    if delta is None:
        body.update({"choices": [], **fields})
    else:
        body["choices"] = [{"index": 0, "delta": delta, **fields}]
    return json.dumps(body)


@pytest.fixture
def wire_of() -> Iterator[Any]:
    servers: list[Wire] = []

    def start(events: list[str]) -> Wire:
        servers.append(Wire(events).__enter__())
        return servers[-1]

    yield start
    for server in servers:
        server.__exit__()


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "List the files."},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "ls first",
        "tool_calls": [
            {
                "id": "functions.bash:0",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "functions.bash:0", "content": "a.txt\nb.txt"},
]
BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
STOP = [chunk({"content": "ok"}), chunk({}, finish_reason="stop")]


async def test_the_request_body_goes_as_given_with_the_key_and_the_extra_fields(
    wire_of: Any,
) -> None:
    server = wire_of(STOP)
    model = OpenAIChatModel(
        base_url=server.base_url,
        api_key="sk-secret",
        model="kimi-k3",
        max_completion_tokens=1234,
        extra_body={"reasoning_effort": "max", "thinking": {"type": "enabled"}},
        token_ids=True,
    )
    try:
        done = await model.complete(HISTORY, [BASH])
    finally:
        await model.aclose()
    assert done.content == "ok"
    [(headers, body)] = server.requests
    assert headers["authorization"] == "Bearer sk-secret"
    assert body == {
        "model": "kimi-k3",
        "messages": HISTORY,  # reasoning_content and tool turns untouched
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 1234,
        "tools": [BASH],
        "logprobs": True,
        "return_token_ids": True,
        "reasoning_effort": "max",
        "thinking": {"type": "enabled"},
    }


async def test_other_servers_chunks_assemble_as_k3s(wire_of: Any) -> None:
    logprob = {"content": [{"token": "a", "logprob": -0.5, "bytes": None, "top_logprobs": []}]}
    server = wire_of(
        [
            chunk({"role": "assistant", "content": None, "tool_calls": None}, logprobs=None),
            chunk({"reasoning": "think "}, token_ids=[5]),  # vLLM's and OpenRouter's name
            chunk({"reasoning_content": "more", "content": None}, token_ids=[6]),
            chunk({"content": "Two calls."}, logprobs=logprob, token_ids=[7]),
            # two calls interleaved by index; the second's id and name come after its first
            # fragment, and a fragment may carry "function": null
            chunk({"tool_calls": [{"index": 0, "id": "c0", "function": {"name": "bash"}}]}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"pa'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command"'}}]}),
            chunk({"tool_calls": [{"index": 1, "id": "c1", "function": {"name": "read"}}]}),
            chunk({"tool_calls": [{"index": 0, "function": None}]}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'th": "a"}'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "ls"}'}}]}),
            chunk(
                {},
                finish_reason="tool_calls",
                # usage inside the choice, cached tokens at the top level (older K3)
                usage={"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 64},
            ),
            chunk(None, prompt_token_ids=[1, 2, 3], usage=None),
        ]
    )
    model = OpenAIChatModel(base_url=server.base_url, api_key="k")
    events: list[StreamEvent] = []
    try:
        done = await model.complete(HISTORY, [BASH], on_event=events.append)
    finally:
        await model.aclose()
    assert done.response_id == "cmpl-7"
    assert done.reasoning_content == "think more" and done.content == "Two calls."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in done.tool_calls] == [
        ("c0", "bash", {"command": "ls"}),
        ("c1", "read", {"path": "a"}),
    ]
    assert done.finish_reason == "tool_calls"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (100, 20)
    assert done.usage.cached_tokens == 64
    assert done.token_ids == [5, 6, 7] and done.logprobs == [-0.5]
    assert done.prompt_token_ids == [1, 2, 3]
    assert done.ttft_s is not None
    kinds = [e.kind for e in events]
    assert kinds == [
        "reasoning",
        "reasoning",
        "content",
        "tool_call_started",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_finished",
        "usage",
    ]
    assert events[-1].usage == done.usage


async def test_cached_and_reasoning_tokens_are_read_from_the_usage_details(wire_of: Any) -> None:
    usage = {
        "prompt_tokens": 50,
        "completion_tokens": 9,
        "total_tokens": 59,
        "prompt_tokens_details": {"cached_tokens": 32},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    # the usage chunk repeated (some servers do): the last one counts, once
    server = wire_of([*STOP, chunk(None, usage=usage), chunk(None, usage=usage)])
    model = OpenAIChatModel(base_url=server.base_url, api_key="k")
    try:
        done = await model.complete(HISTORY)
    finally:
        await model.aclose()
    assert done.usage.model_dump(include={"prompt_tokens", "cached_tokens"}) == {
        "prompt_tokens": 50,
        "cached_tokens": 32,
    }
    assert (done.usage.completion_tokens, done.usage.reasoning_tokens) == (9, 4)


async def test_an_error_event_inside_the_stream_is_an_endpoint_error(wire_of: Any) -> None:
    error = json.dumps({"error": {"message": "engine overloaded mid-stream", "type": "server"}})
    server = wire_of([chunk({"content": "par"}), error])
    model = OpenAIChatModel(
        base_url=server.base_url, api_key="k", max_attempts=2, backoff_initial_s=0.01
    )
    try:
        with pytest.raises(EndpointUnavailable, match="engine overloaded mid-stream"):
            await model.complete(HISTORY)
    finally:
        await model.aclose()
    assert len(server.requests) == 2  # retried, as any transient failure
    assert model.failed_requests == 2


async def test_fields_left_out_read_as_absent_as_the_sdk_read_them(wire_of: Any) -> None:
    # a lone tool call whose fragments carry no index, usage without completion tokens
    server = wire_of(
        [
            chunk({"tool_calls": [{"id": "c0", "function": {"name": "bash", "arguments": ""}}]}),
            chunk({"tool_calls": [{"function": {"arguments": "{}"}}]}),
            json.dumps({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),  # no id
            chunk(None, usage={"prompt_tokens": 7}),
        ]
    )
    model = OpenAIChatModel(base_url=server.base_url, api_key="k", max_attempts=1)
    try:
        done = await model.complete(HISTORY, [BASH])
    finally:
        await model.aclose()
    assert [(c.id, c.name, c.arguments) for c in done.tool_calls] == [("c0", "bash", "{}")]
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (7, 0)
    assert done.response_id == "cmpl-7"


@pytest.mark.parametrize(
    ("events", "quoted"),
    [
        # a choice without a delta
        (
            [json.dumps({"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]})],
            "wrong shape",
        ),
        # a chunk that is not an object
        (["[1, 2]"], "without a list of choices"),
        # a delta that is not an object
        ([json.dumps({"id": "x", "choices": [{"index": 0, "delta": "hi"}]})], "wrong shape"),
        # content that is not text
        ([chunk({"content": 5})], "wrong shape"),
        # usage that is not an object
        ([*STOP, chunk(None, usage="lots")], "usage of the wrong shape"),
    ],
)
async def test_a_chunk_missing_what_the_format_requires_is_a_malformed_answer(
    wire_of: Any, events: list[str], quoted: str
) -> None:
    server = wire_of(events)
    model = OpenAIChatModel(base_url=server.base_url, api_key="k", max_attempts=1)
    try:
        with pytest.raises(MalformedAnswer) as info:
            await model.complete(HISTORY)
    finally:
        await model.aclose()
    assert quoted in str(info.value)
    assert server.base_url in str(info.value)
