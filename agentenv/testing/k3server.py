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
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from pydantic import BaseModel

MODEL = "kimi-k3"
CONTEXT_WINDOW = 1_048_576
VLLM_FIELDS = ("return_token_ids", "chat_template_kwargs", "logprobs", "top_logprobs")


class ScriptedToolCall(BaseModel):
    """A tool call the server will make; ``arguments`` is sent verbatim (it may be invalid
    JSON, to test how the client copes)."""

    name: str
    arguments: str = "{}"


class Fault(BaseModel):
    """A failure to inject into one request: an HTTP error (429 with ``retry_after_s``,
    500, 503; 401 and 403 as a refused key or account), a ``stall`` (no answer for
    ``stall_s``), a ``cut`` stream (the connection drops after a few chunks), or
    ``malformed`` tool-call arguments (cut in half)."""

    kind: Literal["401", "403", "429", "500", "503", "stall", "cut", "malformed"]
    retry_after_s: float = 0.05
    stall_s: float = 30.0


class ScriptedTurn(BaseModel):
    """One answer of the script."""

    reasoning: str = ""
    content: str = ""
    tool_calls: list[ScriptedToolCall] = []


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


class K3Server:
    """Serves ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1 from a script.

    ``script`` is a list of turns, answered in order (the last one repeats), or a function
    from the request body to a turn. Use as a context manager; ``base_url`` is what the
    ``openai`` client wants.
    """

    def __init__(
        self,
        script: list[ScriptedTurn] | Callable[[dict[str, Any]], ScriptedTurn],
        *,
        model: str = MODEL,
        context_window: int = CONTEXT_WINDOW,
        chunk_chars: int = 16,
        faults: list[Fault | None] | None = None,
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
        self.faults = list(faults or [])  # one per request, in order; None: answer normally
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._previous: list[int] = []
        self._sampled: dict[str, list[int]] = {}  # assistant turn → the ids it was sent as
        self._turn = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> K3Server:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

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

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _fault(self, fault: Fault) -> None:
                if fault.kind == "stall":
                    time.sleep(fault.stall_s)
                    self.close_connection = True
                    return
                if fault.kind == "429":
                    data = json.dumps(
                        _error("Your account is rate limited", "rate_limit_reached_error")
                    ).encode()
                    self.send_response(429)
                    self.send_header("Retry-After", f"{fault.retry_after_s:g}")
                elif fault.kind in ("401", "403"):
                    data = json.dumps(
                        _error("Invalid Authentication", "invalid_authentication_error")
                    ).encode()
                    self.send_response(int(fault.kind))
                else:
                    data = json.dumps(
                        _error("engine is currently overloaded", "server_error")
                    ).encode()
                    self.send_response(int(fault.kind))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._json(
                        200, {"object": "list", "data": [{"id": server.model, "object": "model"}]}
                    )
                else:
                    self._json(404, _error(f"no route {self.path}", "not_found_error"))

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, _error(f"no route {self.path}", "not_found_error"))
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                except (ValueError, json.JSONDecodeError) as e:
                    self._json(400, _error(f"invalid JSON body: {e}"))
                    return
                with server._lock:
                    fault = server.faults.pop(0) if server.faults else None
                if fault is not None and fault.kind not in ("cut", "malformed"):
                    server.requests.append(body)
                    self._fault(fault)
                    return
                status, result, prompt, cached = server.answer(body)
                if not isinstance(result, ScriptedTurn):
                    self._json(status, result)
                    return
                if fault is not None and fault.kind == "malformed":
                    result = result.model_copy(
                        update={
                            "tool_calls": [
                                c.model_copy(
                                    update={"arguments": c.arguments[: len(c.arguments) // 2]}
                                )
                                for c in result.tool_calls
                            ]
                        }
                    )
                    fault = None
                chunks = list(server.chunks(result, prompt, cached, body))
                if not body.get("stream"):
                    self._json(200, _as_completion(chunks))
                    return
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                if server.ttft_s:
                    time.sleep(server.ttft_s)
                for n, c in enumerate(chunks):
                    if server.tokens_per_s and c["choices"]:
                        time.sleep(
                            len(
                                c["choices"][0].get("token_ids")
                                or fake_token_ids(_delta_text(c["choices"][0]["delta"]))
                            )
                            / server.tokens_per_s
                        )
                    if fault is not None and n == 3:  # a cut stream: gone mid-answer
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


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
