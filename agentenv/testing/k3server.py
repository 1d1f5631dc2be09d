"""A K3-compatible chat-completions server on loopback, for tests and for users who want to
exercise their environments without a key.

It speaks the wire format of ``K3_PROTOCOL.md``: streamed ``reasoning_content`` deltas, then
content, then tool calls split across chunks by index, a final usage chunk (``choices: []``)
with cached tokens computed from the prefix shared with the previous request, the 400 for an
assistant tool-call message without its ``reasoning_content``, and the context-overflow 400.
Answers come from a script of turns, or from a recorded conversation replayed turn by turn.
It can simulate a slow model (time to first token, tokens per second), inject faults, return
vLLM's token ids and logprobs when asked (or refuse those fields, as the hosted API does).
Every request body is recorded, so tests can assert on what the client really sent.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

MODEL = "kimi-k3"
CONTEXT_WINDOW = 1_048_576
VLLM_FIELDS = ("return_token_ids", "chat_template_kwargs", "logprobs", "top_logprobs")


class ScriptedToolCall(BaseModel):
    """A tool call the server will make; ``arguments`` is sent verbatim (it may be invalid
    JSON, to test how the client copes)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The tool to call: bash, read_file, write_file, … submit.")
    arguments: str = Field(
        "{}",
        description="The arguments as a JSON *string*, as the API sends them: "
        '"{\\"command\\": \\"ls\\"}", not {"command": "ls"}. Sent verbatim.',
    )


class Fault(BaseModel):
    """A failure to inject into one request: an HTTP error (429 with ``retry_after_s``,
    500, 503; 401 and 403 as a refused key or account), a ``stall`` (no answer for
    ``stall_s``), a ``cut`` stream (the connection drops after a few chunks),
    ``malformed`` tool-call arguments (cut in half), or an answer that is not the wire
    format at all: an ``html`` page, a stream with ``bad_utf8`` bytes, ``bad_json`` lines, or
    chunks of a ``bad_shape`` (what a wrong URL or a broken proxy sends)."""

    kind: Literal[
        "401", "403", "429", "500", "503", "stall", "cut", "malformed",
        "html", "bad_utf8", "bad_json", "bad_shape",
    ]  # fmt: skip
    retry_after_s: float = 0.05
    stall_s: float = 30.0


class ScriptedTurn(BaseModel):
    """One answer of the script."""

    model_config = ConfigDict(extra="forbid")

    reasoning: str = Field("", description="Streamed first, as reasoning_content.")
    content: str = Field("", description="The answer's text.")
    tool_calls: list[ScriptedToolCall] = Field([], description="The tool calls it makes.")


def turns_from_messages(messages: list[dict[str, Any]]) -> list[ScriptedTurn]:
    """A script that replays the assistant turns of a recorded conversation (the
    ``messages`` of a trajectory), reasoning, content and tool calls as they were."""
    turns = []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        calls = [
            ScriptedToolCall(
                name=c["function"]["name"], arguments=c["function"].get("arguments") or ""
            )
            for c in m.get("tool_calls") or []
        ]
        turns.append(
            ScriptedTurn(
                reasoning=m.get("reasoning_content") or "",
                content=m.get("content") or "" if not calls else "",
                tool_calls=calls,
            )
        )
    if not turns:
        raise ValueError("the recorded conversation has no assistant turn to replay")
    return turns


DEMO_SCRIPT = [
    ScriptedTurn(
        reasoning="Let me look at the working directory first.",
        tool_calls=[ScriptedToolCall(name="bash", arguments='{"command": "pwd && ls -la"}')],
    ),
    ScriptedTurn(
        reasoning="I have seen the folder; this scripted model has nothing more to do.",
        content="Looked around.",
        tool_calls=[ScriptedToolCall(name="submit", arguments='{"summary": "looked around"}')],
    ),
]
"""What ``agentenv serve-model`` answers with when given no script."""


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: about four bytes a token, as for English text."""
    return (len(text.encode()) + 3) // 4


def _missing_reasoning(messages: list[dict[str, Any]]) -> int | None:
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and m.get("tool_calls") and not m.get("reasoning_content"):
            return i
    return None


class _Listener(ThreadingHTTPServer):
    """The HTTP server, with a listen backlog as deep as the host allows (the kernel caps
    it at ``net.core.somaxconn``). A job's episodes connect in bursts: hundreds of streams
    at once, of which the ``openai`` client keeps only 100 connections alive, reconnect
    together. The standard library's backlog of 5 overflowed then, the kernel answered
    with SYN cookies, and the connections whose cookie failed were reset: the client saw
    ``APIConnectionError: Connection error.`` from a server that was merely busy."""

    request_queue_size = socket.SOMAXCONN


class K3Server:
    """Serves ``/v1/chat/completions`` and ``/v1/models`` from a script: on 127.0.0.1
    inside ``with`` (``base_url`` is what the ``openai`` client wants), or in this process
    without a socket (:meth:`http_client`).

    ``script`` is a list of turns, answered in order (the last one repeats), or a function
    from the request body to a turn.
    """

    def __init__(
        self,
        script: list[ScriptedTurn] | Callable[[dict[str, Any]], ScriptedTurn],
        *,
        model: str = MODEL,
        context_window: int = CONTEXT_WINDOW,
        chunk_chars: int = 16,
        faults: list[Fault | None] | Callable[[dict[str, Any]], Fault | None] | None = None,
        ttft_s: float = 0.0,
        tokens_per_s: float | None = None,
        hosted: bool = False,
        port: int = 0,
    ):
        self.script = script
        self.ttft_s = ttft_s  # time to first token
        self.tokens_per_s = tokens_per_s  # decode speed; None: as fast as possible
        self.hosted = hosted  # refuse vLLM-only fields with a 400, as Moonshot's API does
        self.model = model
        self.context_window = context_window
        self.chunk_chars = chunk_chars
        # one per request, in order (None: answer normally), or a function of the request
        self.faults = faults if callable(faults) else list(faults or [])
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._previous: list[int] = []
        self._sampled: dict[str, list[int]] = {}  # assistant turn → the ids it was sent as
        self._turn = 0
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None  # listening only inside ``with``
        self._address: tuple[str, int] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: where it listens inside ``with`` (and listened,
        after)."""
        if self._address is None:
            raise RuntimeError("K3Server listens only inside `with`; or use http_client()")
        host, port = self._address
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> K3Server:
        self._httpd = _Listener(("127.0.0.1", self._port), self._handler())
        host, port = self._httpd.server_address[:2]
        self._address = (str(host), int(port))
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # -- answering -------------------------------------------------------------------------

    def _next_turn(self, body: dict[str, Any]) -> ScriptedTurn:
        if callable(self.script):
            return self.script(body)
        turn = self.script[min(self._turn, len(self.script) - 1)]
        self._turn += 1
        return turn

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        """The request's prompt as stand-in token ids: the tools, then each message on its
        own, an assistant message this server sampled rendered as the very ids it sent. So
        an append-only history gives prompts that extend each other token for token, as a
        real chat template does (which is what cached tokens and token exports rely on)."""
        ids = fake_token_ids(json.dumps(body.get("tools"), sort_keys=True))
        for message in body.get("messages") or []:
            sampled = (
                self._sampled.get(_message_key(message))
                if message.get("role") == "assistant"
                else None
            )
            ids += (
                sampled
                if sampled is not None
                else fake_token_ids(json.dumps(message, sort_keys=True))
            )
        return ids

    def answer(
        self, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | ScriptedTurn, list[int], int]:
        """Validate and account one request: (status, error body or turn, prompt token ids,
        cached tokens: the prefix shared with the previous request)."""
        with self._lock:
            self.requests.append(body)
            refused = [f for f in VLLM_FIELDS if f in body] if self.hosted else []
            if refused:
                return 400, _error(f"unknown fields: {', '.join(refused)}"), [], 0
            index = _missing_reasoning(body.get("messages") or [])
            if index is not None:
                return (
                    400,
                    _error(
                        "thinking is enabled but reasoning_content is missing in assistant tool "
                        f"call message at index {index}"
                    ),
                    [],
                    0,
                )
            ids = self.prompt_ids(body)
            prompt = len(ids)
            if prompt > self.context_window:
                return (
                    400,
                    _error(
                        f"Invalid request: Your request exceeded model token limit: {prompt} > "
                        f"{self.context_window}"
                    ),
                    [],
                    0,
                )
            shared = 0
            for a, b in zip(ids, self._previous, strict=False):
                if a != b:
                    break
                shared += 1
            self._previous = ids
            if not callable(self.script):
                return 200, self._next_turn(body), ids, shared
        # A script function runs outside the lock: it may be slow, and requests overlap.
        return 200, self._next_turn(body), ids, shared

    def chunks(
        self,
        turn: ScriptedTurn,
        prompt_ids: list[int],
        cached: int,
        body: dict[str, Any] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The streamed chunks of one turn, usage last; with vLLM's token ids and logprobs
        when the request asked for them."""
        rid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())
        body = body or {}
        want_ids, want_logprobs = bool(body.get("return_token_ids")), bool(body.get("logprobs"))

        def chunk(
            delta: dict[str, Any], finish: str | None = None, text: str = ""
        ) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
            ids = fake_token_ids(text)
            if want_ids:
                choice["token_ids"] = ids
            if want_logprobs:
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": f"<{t}>",
                            "logprob": -(t % 997) / 997,
                            "bytes": None,
                            "top_logprobs": [],
                        }
                        for t in ids
                    ]
                }
            return {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model,
                "choices": [choice],
            }

        first = chunk({"role": "assistant", "content": ""})
        if want_ids:
            first["prompt_token_ids"] = prompt_ids
        yield first
        for piece in _pieces(turn.reasoning, self.chunk_chars):
            yield chunk({"reasoning_content": piece}, text=piece)
        for piece in _pieces(turn.content, self.chunk_chars):
            yield chunk({"content": piece}, text=piece)
        for i, call in enumerate(turn.tool_calls):
            head = {"index": i, "id": f"functions.{call.name}:{i}", "type": "function"}
            yield chunk(
                {"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}
            )
            for piece in _pieces(call.arguments, self.chunk_chars):
                yield chunk(
                    {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}, text=piece
                )
        yield chunk({}, "tool_calls" if turn.tool_calls else "stop")
        sampled = self.sampled_ids(turn)
        with self._lock:
            self._sampled[_turn_key(turn)] = sampled
        reasoning = sum(len(fake_token_ids(p)) for p in _pieces(turn.reasoning, self.chunk_chars))
        out = len(sampled)
        prompt = len(prompt_ids)
        yield {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": self.model,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": out,
                "total_tokens": prompt + out,
                "cached_tokens": cached,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning},
            },
        }

    def sampled_ids(self, turn: ScriptedTurn) -> list[int]:
        """The completion token ids of ``turn``, as its chunks carry them."""
        ids: list[int] = []
        for piece in _pieces(turn.reasoning, self.chunk_chars):
            ids += fake_token_ids(piece)
        for piece in _pieces(turn.content, self.chunk_chars):
            ids += fake_token_ids(piece)
        for call in turn.tool_calls:
            for piece in _pieces(call.arguments, self.chunk_chars):
                ids += fake_token_ids(piece)
        return ids

    def respond(self, method: str, path: str, raw: bytes) -> Reply:
        """The reply to one request, whatever carries it (HTTP on loopback, or the
        in-process transport of :meth:`http_client`)."""
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET":
            if path == "/v1/models":
                models = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
                return Reply.json(200, models)
            return Reply.json(404, _error(f"no route {path}", "not_found_error"))
        if path != "/v1/chat/completions":
            return Reply.json(404, _error(f"no route {path}", "not_found_error"))
        try:
            body = json.loads(raw)
        except (ValueError, json.JSONDecodeError) as e:
            return Reply.json(400, _error(f"invalid JSON body: {e}"))
        with self._lock:
            if callable(self.faults):
                fault = self.faults(body)
            else:
                fault = self.faults.pop(0) if self.faults else None
        if fault is not None and fault.kind not in ("cut", "malformed"):
            self.requests.append(body)
            return _fault_reply(fault)
        status, result, prompt, cached = self.answer(body)
        if not isinstance(result, ScriptedTurn):
            return Reply.json(status, result)
        if fault is not None and fault.kind == "malformed":
            cut_calls = [
                c.model_copy(update={"arguments": c.arguments[: len(c.arguments) // 2]})
                for c in result.tool_calls
            ]
            result = result.model_copy(update={"tool_calls": cut_calls})
            fault = None
        chunks = list(self.chunks(result, prompt, cached, body))
        if not body.get("stream"):
            return Reply.json(200, _as_completion(chunks))
        events: list[tuple[float, bytes]] = []
        for n, c in enumerate(chunks):
            if fault is not None and n == 3:  # a cut stream: gone mid-answer
                return Reply(status=200, headers=_SSE, events=events, cut=True)
            delay = self.ttft_s if n == 0 else 0.0
            if self.tokens_per_s and c["choices"]:
                choice = c["choices"][0]
                ids = choice.get("token_ids") or fake_token_ids(_delta_text(choice["delta"]))
                delay += len(ids) / self.tokens_per_s
            events.append((delay, f"data: {json.dumps(c)}\n\n".encode()))
        events.append((self.ttft_s if not chunks else 0.0, b"data: [DONE]\n\n"))
        return Reply(status=200, headers=_SSE, events=events)

    def http_client(self) -> Any:
        """An HTTP client of the kind the ``openai`` SDK takes
        (``openai.DefaultAsyncHttpxClient``) that answers in this process, without a
        socket: pass it to ``OpenAIChatModel(http_client=...)`` with
        ``base_url=IN_PROCESS_URL``. For tests of everything but the network (a cut stream
        or a stall is what the client would see of it: a dropped connection; read timeouts
        are the socket's, so they need ``with``)."""
        import importlib

        import openai

        # the SDK's HTTP library (httpx, or its successor httpx2), whichever it is built on
        base = next(
            c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient"
        )
        http = importlib.import_module(base.__module__.split(".")[0])
        # the library's own base class gives the transport its context-manager methods
        transport = type("K3InProcessTransport", (_InProcess, http.AsyncBaseTransport), {})
        return openai.DefaultAsyncHttpxClient(transport=transport(self, http))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _reply(self, method: str) -> None:
                size = int(self.headers.get("Content-Length", 0) or 0)
                reply = server.respond(method, self.path, self.rfile.read(size))
                if reply.stall_s is not None:
                    time.sleep(reply.stall_s)
                    self.close_connection = True
                    return
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.events is None:
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                self.send_header("Connection", "close")
                self.end_headers()
                for delay, data in reply.events:
                    if delay:
                        time.sleep(delay)
                    self.wfile.write(data)
                    self.wfile.flush()
                if reply.cut:
                    self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True

            def do_GET(self) -> None:
                self._reply("GET")

            def do_POST(self) -> None:
                self._reply("POST")

        return Handler


IN_PROCESS_URL = "http://k3-in-process/v1"
"""The base URL to give the ``openai`` client with :meth:`K3Server.http_client`."""

_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


@dataclass
class Reply:
    """What the server answers: a status with headers and a body, or a stream of
    server-sent events (each after a delay; ``cut``: the connection drops after them), or
    nothing at all after ``stall_s`` seconds."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: list[tuple[float, bytes]] | None = None
    cut: bool = False
    stall_s: float | None = None

    @classmethod
    def json(cls, status: int, body: dict[str, Any], **headers: str) -> Reply:
        """A JSON answer."""
        data = json.dumps(body).encode()
        return cls(
            status=status, headers={"Content-Type": "application/json", **headers}, body=data
        )


GARBAGE = {
    "html": b"<!DOCTYPE html>\n<html><body>It works!</body></html>\n",
    "bad_utf8": b"data: \xff\xfe\x00 not text\n\n",
    "bad_json": b"data: {choices: [\n\n",
    "bad_shape": b'data: {"id": "x", "choices": "none"}\n\n',
}
"""The first bytes of each kind of answer that is not the wire format."""


def _fault_reply(fault: Fault) -> Reply:
    if fault.kind in GARBAGE:
        kind = "text/html" if fault.kind == "html" else "text/event-stream"
        return Reply(status=200, headers={"Content-Type": kind}, body=GARBAGE[fault.kind])
    if fault.kind == "stall":
        return Reply(stall_s=fault.stall_s)
    if fault.kind == "429":
        body = _error("Your account is rate limited", "rate_limit_reached_error")
        return Reply.json(429, body, **{"Retry-After": f"{fault.retry_after_s:g}"})
    if fault.kind in ("401", "403"):
        return Reply.json(
            int(fault.kind), _error("Invalid Authentication", "invalid_authentication_error")
        )
    return Reply.json(int(fault.kind), _error("engine is currently overloaded", "server_error"))


class _InProcess:
    """An HTTP transport (httpx's interface) that hands requests to a :class:`K3Server` in
    this process."""

    def __init__(self, server: K3Server, httpx: Any):
        self._server = server
        self._httpx = httpx

    async def handle_async_request(self, request: Any) -> Any:
        httpx = self._httpx
        raw = await request.aread()
        reply = self._server.respond(request.method, request.url.path, raw)
        if reply.stall_s is not None:
            await anyio.sleep(reply.stall_s)
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        if reply.events is None:
            return httpx.Response(reply.status, headers=reply.headers, content=reply.body)

        async def events() -> AsyncIterator[bytes]:
            for delay, data in reply.events or []:
                if delay:
                    await anyio.sleep(delay)
                yield data
            # a cut stream just ends, as a closed connection ends a body sent without a
            # length: no [DONE], no finish reason

        return httpx.Response(reply.status, headers=reply.headers, content=events())


def _turn_key(turn: ScriptedTurn) -> str:
    args = [c.arguments for c in turn.tool_calls]
    return json.dumps([turn.reasoning, args, "" if args else turn.content])


def _message_key(message: dict[str, Any]) -> str:
    # the same key for the assistant message a client sends back (its content may be a
    # placeholder when it made tool calls, so content counts only without them)
    args = [
        (c.get("function") or {}).get("arguments") or "" for c in message.get("tool_calls") or []
    ]
    content = "" if args else (message.get("content") or "")
    return json.dumps([message.get("reasoning_content") or "", args, content])


def fake_token_ids(text: str) -> list[int]:
    """Stand-in token ids, one per :func:`count_tokens` token, stable for the same text."""
    data = text.encode()
    return [zlib.crc32(data[i : i + 4]) % 163_840 for i in range(0, len(data), 4)]


def _delta_text(delta: dict[str, Any]) -> str:
    calls = delta.get("tool_calls") or []
    args = "".join((c.get("function") or {}).get("arguments") or "" for c in calls)
    return (delta.get("reasoning_content") or "") + (delta.get("content") or "") + args


def _pieces(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


def _as_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The non-streamed answer, assembled from the same chunks."""
    message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": ""}
    calls: dict[int, dict[str, Any]] = {}
    finish, usage = None, None
    for c in chunks:
        usage = c.get("usage") or usage
        for choice in c["choices"]:
            delta = choice["delta"]
            message["content"] += delta.get("content") or ""
            message["reasoning_content"] += delta.get("reasoning_content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    tc["index"], {"type": "function", "function": {"arguments": ""}}
                )
                slot.setdefault("id", tc.get("id"))
                if "name" in tc.get("function", {}):
                    slot["function"]["name"] = tc["function"]["name"]
                slot["function"]["arguments"] += tc.get("function", {}).get("arguments", "")
            finish = choice.get("finish_reason") or finish
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {
        "id": chunks[0]["id"],
        "object": "chat.completion",
        "created": chunks[0]["created"],
        "model": chunks[0]["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
