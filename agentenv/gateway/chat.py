"""OpenAI Chat Completions (``POST /v1/chat/completions``), as mini-swe-agent and other
OpenAI-compatible harnesses speak it, including K3's ``reasoning_content`` on assistant
turns (read back from the harness, or ``reasoning`` as some servers call it).

What it accepts and refuses, field by field: ``docs/gateway-apis.md``."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from agentenv.gateway.dialect import Call, DialectError, require, sse, text_of
from agentenv.model.types import Completion


def parse_tools(tools: Any, where: str) -> list[dict[str, Any]]:
    """Chat-completions tool schemas, checked and reduced to the fields the model reads."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise DialectError(f"{where}: 'tools' must be a list")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
            raise DialectError(f"{where}: tools[{i}] is of type {kind!r}; only 'function'")
        fn = tool.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise DialectError(f"{where}: tools[{i}].function.name is required")
        kept = {"name": fn["name"]}
        if fn.get("description"):
            kept["description"] = fn["description"]
        kept["parameters"] = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": kept})
    return out


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        raise DialectError(f"{where}: tool_calls must be a list")
    out = []
    for j, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not c.get("id"):
            raise DialectError(f"{where}: tool_calls[{j}] needs an id and function.name")
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):  # some clients send the object itself
            arguments = json.dumps(arguments if arguments is not None else {})
        out.append(
            {
                "id": str(c["id"]),
                "type": "function",
                "function": {"name": fn["name"], "arguments": arguments},
            }
        )
    return out


def parse_message(m: Any, i: int) -> dict[str, Any]:
    """One chat message in the loop's form: text content, an assistant's reasoning and
    tool calls, a tool result's call id. ``developer`` becomes ``system``."""
    where = f"messages[{i}]"
    if not isinstance(m, dict):
        raise DialectError(f"{where} must be an object")
    role = m.get("role")
    if role in ("system", "developer", "user"):
        return {
            "role": "system" if role == "developer" else role,
            "content": text_of(m.get("content"), where),
        }
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": text_of(m.get("content"), where)}
        reasoning = m.get("reasoning_content") or m.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            out["reasoning_content"] = reasoning
        if m.get("tool_calls"):
            out["tool_calls"] = _tool_calls(m["tool_calls"], where)
        return out
    if role == "tool":
        if not m.get("tool_call_id"):
            raise DialectError(f"{where}: a tool message needs its tool_call_id")
        return {
            "role": "tool",
            "tool_call_id": str(m["tool_call_id"]),
            "content": text_of(m.get("content"), where),
        }
    if role == "function":
        raise DialectError(f"{where}: role 'function' (the legacy API) is not supported; use tools")
    raise DialectError(f"{where}: unknown role {role!r}")


def finish_reason(done: Completion) -> str:
    """The chat-completions finish reason: decided by the calls made, as K3's engines differ."""
    if done.tool_calls:
        return "tool_calls"
    return done.finish_reason if done.finish_reason in ("length", "content_filter") else "stop"


def usage(done: Completion) -> dict[str, Any]:
    """The answer's usage in chat-completions form, cached and reasoning tokens included."""
    u = done.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    }


class ChatDialect:
    """OpenAI Chat Completions."""

    name = "chat"
    paths = ("/v1/chat/completions", "/chat/completions")

    def parse(self, body: dict[str, Any]) -> Call:
        """The request as a :class:`Call`; refuses what the routed model cannot honour."""
        where = "chat.completions"
        # Sampling and budget fields (temperature, max_tokens, tool_choice, ...) are the
        # routed endpoint's to decide (K3 refuses most of them when thinking): not forwarded.
        if body.get("functions") or body.get("function_call"):
            raise DialectError(f"{where}: 'functions' (the legacy API) is not supported; use tools")
        if body.get("n") not in (None, 1):
            raise DialectError(f"{where}: n must be 1 (ask n times for n samples)")
        messages = require(body, "messages", list, where)
        if not messages:
            raise DialectError(f"{where}: 'messages' is empty")
        return Call(
            messages=[parse_message(m, i) for i, m in enumerate(messages)],
            tools=parse_tools(body.get("tools"), where),
            stream=bool(body.get("stream")),
            model=str(body.get("model") or ""),
        )

    def _message(self, done: Completion) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": done.content or None}
        if done.reasoning_content:
            message["reasoning_content"] = done.reasoning_content
        if done.tool_calls:
            message["tool_calls"] = [c.as_message() for c in done.tool_calls]
        return message

    def answer(self, done: Completion, call: Call) -> dict[str, Any]:
        """A ``chat.completion`` object."""
        return {
            "id": done.response_id or f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": call.model or done.model or "",
            "choices": [
                {
                    "index": 0,
                    "message": self._message(done),
                    "finish_reason": finish_reason(done),
                    "logprobs": None,
                }
            ],
            "usage": usage(done),
        }

    def events(self, done: Completion, call: Call) -> list[bytes]:
        """``chat.completion.chunk`` frames: role, reasoning, content, each tool call whole
        (index, id, name, arguments), the finish reason with usage, then ``[DONE]``."""
        head = {
            "id": done.response_id or f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": call.model or done.model or "",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            return sse({**head, "choices": [choice], **more})

        frames = [chunk({"role": "assistant", "content": ""})]
        if done.reasoning_content:
            frames.append(chunk({"reasoning_content": done.reasoning_content}))
        if done.content:
            frames.append(chunk({"content": done.content}))
        for i, c in enumerate(done.tool_calls):
            frames.append(chunk({"tool_calls": [{"index": i, **c.as_message()}]}))
        frames.append(chunk({}, finish_reason(done), usage=usage(done)))
        frames.append(b"data: [DONE]\n\n")
        return frames

    def error(self, status: int, message: str) -> dict[str, Any]:
        """OpenAI's error shape."""
        return openai_error(status, message)


def openai_error(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error body; a context overflow carries the code clients look for
    (Codex's ``context_length_exceeded``)."""
    code = "context_length_exceeded" if message.startswith("context_length_exceeded") else None
    return {
        "error": {
            "message": message,
            "type": openai_error_type(status),
            "code": code,
            "param": None,
        }
    }


def openai_error_type(status: int) -> str:
    """The ``error.type`` OpenAI's APIs give a status."""
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        405: "invalid_request_error",
        413: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")


DIALECT = ChatDialect()

__all__ = [
    "DIALECT",
    "ChatDialect",
    "finish_reason",
    "openai_error",
    "openai_error_type",
    "parse_message",
]
