"""The Anthropic Messages API (``POST /v1/messages``) as Claude Code speaks it: a system
prompt as a string or text blocks; content blocks text, thinking, tool_use and tool_result;
tools with an ``input_schema``; streamed as message_start, content_block_start/delta/stop
(text_delta, thinking_delta, signature_delta, input_json_delta), message_delta and
message_stop. The model's ``reasoning_content`` is a thinking block, and a thinking block
that comes back is the assistant turn's ``reasoning_content`` again.

What it accepts and refuses, field by field: ``docs/gateway-apis.md``."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from agentenv.gateway.dialect import Call, DialectError, require, sse, text_of
from agentenv.model.types import Completion

# A tool call whose arguments are not a JSON object still needs an ``input`` object: the
# text goes in this key, so the harness's tool reports the bad call and the turn comes back
# as it was made
RAW_ARGUMENTS = "_unparsed_arguments"
OMITTED = "[{kind} omitted: the routed model reads text only]"


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {RAW_ARGUMENTS: arguments}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS: arguments}


def _arguments(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {RAW_ARGUMENTS}:
        return str(value[RAW_ARGUMENTS])
    return json.dumps(value if value is not None else {})


def _signature(thinking: str) -> str:
    # the Messages API pairs thinking with a signature; ours only says where it came from
    return "agentenv-" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise DialectError(f"{where}: content must be a string or a list of blocks")
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise DialectError(f"{where}: content[{i}] must be a block with a type")
    return content


def _result_text(block: dict[str, Any], where: str) -> str:
    content = block.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in _blocks(content, where):
        if part["type"] == "text":
            parts.append(str(part.get("text") or ""))
        else:  # an image a tool read, say: the model cannot see it, the harness goes on
            parts.append(OMITTED.format(kind=part["type"]))
    return "\n".join(parts)


def _user(blocks: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """A user turn: its tool results as tool messages (in order), then its text."""
    out: list[dict[str, Any]] = []
    texts = []
    for i, b in enumerate(blocks):
        kind = b["type"]
        if kind == "tool_result":
            if not b.get("tool_use_id"):
                raise DialectError(f"{where}.content[{i}]: tool_result needs its tool_use_id")
            text = _result_text(b, f"{where}.content[{i}]")
            if b.get("is_error"):
                text = f"Error: {text}" if text else "Error"
            out.append({"role": "tool", "tool_call_id": str(b["tool_use_id"]), "content": text})
        elif kind == "text":
            texts.append(str(b.get("text") or ""))
        else:
            raise DialectError(
                f"{where}.content[{i}] is a {kind!r} block; a user turn may hold text and "
                "tool_result blocks (the routed model reads text only)"
            )
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _assistant(blocks: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """An assistant turn: thinking as reasoning_content, text, tool_use as tool calls."""
    reasoning, texts, calls = [], [], []
    for i, b in enumerate(blocks):
        kind = b["type"]
        if kind == "thinking":
            reasoning.append(str(b.get("thinking") or ""))
        elif kind == "redacted_thinking":
            continue  # nothing of ours is ever redacted; another model's cannot be read
        elif kind == "text":
            texts.append(str(b.get("text") or ""))
        elif kind == "tool_use":
            if not b.get("id") or not isinstance(b.get("name"), str):
                raise DialectError(f"{where}.content[{i}]: tool_use needs an id and a name")
            calls.append(
                {
                    "id": str(b["id"]),
                    "type": "function",
                    "function": {"name": b["name"], "arguments": _arguments(b.get("input"))},
                }
            )
        else:
            raise DialectError(f"{where}.content[{i}] is a {kind!r} block, not supported")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(tools: Any, where: str) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise DialectError(f"{where}: 'tools' must be a list")
    out = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise DialectError(f"{where}: tools[{i}] needs a name")
        if t.get("type") not in (None, "custom"):
            continue  # a server tool (web search, ...) that only Anthropic runs: not offered
        fn: dict[str, Any] = {"name": t["name"]}
        if t.get("description"):
            fn["description"] = t["description"]
        fn["parameters"] = t.get("input_schema") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": fn})
    return out


def stop_reason(done: Completion) -> str:
    """The Messages API's stop reason."""
    if done.tool_calls:
        return "tool_use"
    return "max_tokens" if done.finish_reason == "length" else "end_turn"


def usage(done: Completion) -> dict[str, Any]:
    """Usage as the Messages API counts it: ``input_tokens`` leaves out the cached part."""
    u = done.usage
    return {
        "input_tokens": max(0, u.prompt_tokens - u.cached_tokens),
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": u.completion_tokens,
    }


def content(done: Completion) -> list[dict[str, Any]]:
    """The answer's content blocks: thinking, text, tool uses."""
    blocks: list[dict[str, Any]] = []
    if done.reasoning_content:
        blocks.append(
            {
                "type": "thinking",
                "thinking": done.reasoning_content,
                "signature": _signature(done.reasoning_content),
            }
        )
    if done.content:
        blocks.append({"type": "text", "text": done.content})
    for c in done.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
        )
    return blocks


class AnthropicDialect:
    """The Anthropic Messages API."""

    name = "anthropic"
    paths = ("/v1/messages",)

    def parse(self, body: dict[str, Any]) -> Call:
        """The request as a :class:`Call` (also what ``count_tokens`` sends)."""
        where = "messages"
        raw = require(body, "messages", list, where)
        if not raw:
            raise DialectError(f"{where}: 'messages' is empty")
        messages: list[dict[str, Any]] = []
        system = body.get("system")
        if system:
            if isinstance(system, list):
                system = [b for b in system if isinstance(b, dict)]  # cache_control dropped
            messages.append({"role": "system", "content": text_of(system, "system")})
        for i, m in enumerate(raw):
            at = f"messages[{i}]"
            if not isinstance(m, dict):
                raise DialectError(f"{at} must be an object")
            blocks = _blocks(m.get("content"), at)
            if m.get("role") == "user":
                messages += _user(blocks, at)
            elif m.get("role") == "assistant":
                messages.append(_assistant(blocks, at))
            else:
                raise DialectError(f"{at}: role must be 'user' or 'assistant'")
        return Call(
            messages=messages,
            tools=_tools(body.get("tools"), where),
            stream=bool(body.get("stream")),
            model=str(body.get("model") or ""),
        )

    def answer(self, done: Completion, call: Call) -> dict[str, Any]:
        """A ``message`` object."""
        return {
            "id": f"msg_{uuid.uuid4().hex}",
            "type": "message",
            "role": "assistant",
            "model": call.model or done.model or "",
            "content": content(done),
            "stop_reason": stop_reason(done),
            "stop_sequence": None,
            "usage": usage(done),
        }

    def events(self, done: Completion, call: Call) -> list[bytes]:
        """The Messages API's event stream for ``done``, one block after another."""
        message = self.answer(done, call)
        blocks = message.pop("content")
        head = {**message, "content": [], "stop_reason": None}
        head["usage"] = {**message["usage"], "output_tokens": 0}
        frames = [sse({"type": "message_start", "message": head}, "message_start")]
        for i, block in enumerate(blocks):
            kind = block["type"]
            if kind == "thinking":
                empty: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": block["thinking"]},
                    {"type": "signature_delta", "signature": block["signature"]},
                ]
            elif kind == "text":
                empty = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": block["text"]}]
            else:
                empty = {**block, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
            start = {"type": "content_block_start", "index": i, "content_block": empty}
            frames.append(sse(start, "content_block_start"))
            for delta in deltas:
                frames.append(
                    sse(
                        {"type": "content_block_delta", "index": i, "delta": delta},
                        "content_block_delta",
                    )
                )
            frames.append(sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
        end = {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": message["usage"],
        }
        frames.append(sse(end, "message_delta"))
        frames.append(sse({"type": "message_stop"}, "message_stop"))
        return frames

    def error(self, status: int, message: str) -> dict[str, Any]:
        """Anthropic's error shape."""
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            503: "overloaded_error",
        }.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}


DIALECT = AnthropicDialect()

__all__ = ["DIALECT", "RAW_ARGUMENTS", "AnthropicDialect", "content", "stop_reason", "usage"]
