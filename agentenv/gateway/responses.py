"""The OpenAI Responses API (``POST /v1/responses``) as Codex CLI speaks it: ``instructions``
and ``input`` items (message, reasoning, function_call, function_call_output), tools of type
function, answered as output items (reasoning, message, function_call) whole or as events:
response.created, output_item.added, reasoning_text / output_text /
function_call_arguments deltas, output_item.done, response.completed with usage (which Codex
requires before the stream ends). The model's ``reasoning_content`` is a reasoning item's
``reasoning_text``; a reasoning item that comes back is the next assistant turn's again.

What it accepts and refuses, field by field: ``docs/gateway-apis.md``."""

from __future__ import annotations

import time
import uuid
from typing import Any

from agentenv.gateway.chat import openai_error
from agentenv.gateway.dialect import Call, DialectError, require, sse, text_of
from agentenv.model.types import Completion


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _reasoning_text(item: dict[str, Any]) -> str:
    parts = item.get("content") or item.get("summary") or []
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))


def _output_text(output: Any, where: str) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = []
        for part in output:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("input_text", "output_text", "text"):
                texts.append(str(part.get("text") or ""))
            else:
                texts.append(f"[{kind} omitted: the routed model reads text only]")
        return "\n".join(texts)
    raise DialectError(f"{where}: output must be a string or a list of content items")


class _Turns:
    """Input items folded into chat messages: consecutive reasoning, assistant message and
    function_call items are one assistant turn, as the model produced them."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None

    def close(self) -> None:
        if self._open is not None:
            self.messages.append(self._open)
            self._open = None

    def assistant(self, *, starts: bool = False) -> dict[str, Any]:
        # a reasoning item starts a turn; text after a call does too
        if self._open is not None and (starts or self._open.get("tool_calls")):
            self.close()
        if self._open is None:
            self._open = {"role": "assistant", "content": ""}
        return self._open

    def add(self, message: dict[str, Any]) -> None:
        self.close()
        self.messages.append(message)


def _fold(items: list[Any]) -> list[dict[str, Any]]:
    turns = _Turns()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise DialectError(f"{where} must be an object")
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            text = text_of(item.get("content"), where)
            if role == "assistant":
                turn = turns.assistant(starts=False)
                turn["content"] += text
            elif role in ("user", "system", "developer"):
                turns.add({"role": "system" if role == "developer" else role, "content": text})
            else:
                raise DialectError(f"{where}: unknown role {role!r}")
        elif kind == "reasoning":
            turn = turns.assistant(starts=True)
            turn["reasoning_content"] = _reasoning_text(item)
        elif kind == "function_call":
            if not item.get("call_id") or not isinstance(item.get("name"), str):
                raise DialectError(f"{where}: a function_call needs call_id and name")
            turn = turns.assistant()
            turn.setdefault("tool_calls", []).append(
                {
                    "id": str(item["call_id"]),
                    "type": "function",
                    "function": {
                        "name": item["name"],
                        "arguments": str(item.get("arguments") or ""),
                    },
                }
            )
        elif kind == "function_call_output":
            if not item.get("call_id"):
                raise DialectError(f"{where}: a function_call_output needs its call_id")
            turns.add(
                {
                    "role": "tool",
                    "tool_call_id": str(item["call_id"]),
                    "content": _output_text(item.get("output"), where),
                }
            )
        else:
            raise DialectError(
                f"{where} is of type {kind!r}; the gateway reads message, reasoning, "
                "function_call and function_call_output items"
            )
    turns.close()
    return turns.messages


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise DialectError("responses: 'tools' must be a list")
    out = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict):
            raise DialectError(f"responses: tools[{i}] must be an object")
        if t.get("type") != "function":
            continue  # hosted tools (web_search, local_shell, custom grammars): not offered
        if not isinstance(t.get("name"), str):
            raise DialectError(f"responses: tools[{i}] needs a name")
        fn: dict[str, Any] = {"name": t["name"]}
        if t.get("description"):
            fn["description"] = t["description"]
        fn["parameters"] = t.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": fn})
    return out


def usage(done: Completion) -> dict[str, Any]:
    """The Responses API's usage (Codex requires every field but the details)."""
    u = done.usage
    return {
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


def output(done: Completion) -> list[dict[str, Any]]:
    """The answer as output items: reasoning, message, function calls."""
    items: list[dict[str, Any]] = []
    if done.reasoning_content:
        items.append(
            {
                "type": "reasoning",
                "id": _new_id("rs"),
                "summary": [],
                "content": [{"type": "reasoning_text", "text": done.reasoning_content}],
            }
        )
    if done.content:
        items.append(
            {
                "type": "message",
                "id": _new_id("msg"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": done.content, "annotations": []}],
            }
        )
    for c in done.tool_calls:
        items.append(
            {
                "type": "function_call",
                "id": _new_id("fc"),
                "status": "completed",
                "call_id": c.id,
                "name": c.name,
                "arguments": c.arguments,
            }
        )
    return items


class ResponsesDialect:
    """The OpenAI Responses API."""

    name = "responses"
    paths = ("/v1/responses", "/responses")

    def parse(self, body: dict[str, Any]) -> Call:
        """The request as a :class:`Call`; ``previous_response_id`` is refused (the gateway
        keeps no conversations: the harness sends its whole input, as Codex does)."""
        if body.get("previous_response_id"):
            raise DialectError(
                "responses: previous_response_id is not supported; send the whole input "
                "(store: false)"
            )
        raw = require(body, "input", (str, list), "responses")
        messages: list[dict[str, Any]] = []
        if body.get("instructions"):
            messages.append(
                {"role": "system", "content": text_of(body["instructions"], "instructions")}
            )
        if isinstance(raw, str):
            messages.append({"role": "user", "content": raw})
        else:
            messages += _fold(raw)
        if not any(m["role"] != "system" for m in messages):
            raise DialectError("responses: 'input' has no user turn")
        return Call(
            messages=messages,
            tools=_tools(body.get("tools")),
            stream=bool(body.get("stream")),
            model=str(body.get("model") or ""),
        )

    def _response(
        self, done: Completion, call: Call, items: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "id": done.response_id
            if (done.response_id or "").startswith("resp_")
            else _new_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "model": call.model or done.model or "",
            "output": items,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage(done),
        }

    def answer(self, done: Completion, call: Call) -> dict[str, Any]:
        """A ``response`` object."""
        return self._response(done, call, output(done))

    def events(self, done: Completion, call: Call) -> list[bytes]:
        """The Responses event stream for ``done``."""
        items = output(done)
        full = self._response(done, call, items)
        frames: list[bytes] = []

        def emit(kind: str, **data: Any) -> None:
            frames.append(sse({"type": kind, "sequence_number": len(frames), **data}, kind))

        emit(
            "response.created",
            response={**full, "status": "in_progress", "output": [], "usage": None},
        )
        for n, item in enumerate(items):
            at = {"item_id": item["id"], "output_index": n}
            if item["type"] == "reasoning":
                text = item["content"][0]["text"]
                empty = {**item, "content": [{"type": "reasoning_text", "text": ""}]}
                emit("response.output_item.added", output_index=n, item=empty)
                emit("response.reasoning_text.delta", **at, content_index=0, delta=text)
                emit("response.reasoning_text.done", **at, content_index=0, text=text)
            elif item["type"] == "message":
                text = item["content"][0]["text"]
                part = {"type": "output_text", "text": "", "annotations": []}
                emit(
                    "response.output_item.added",
                    output_index=n,
                    item={**item, "status": "in_progress", "content": []},
                )
                emit("response.content_part.added", **at, content_index=0, part=part)
                emit("response.output_text.delta", **at, content_index=0, delta=text)
                emit("response.output_text.done", **at, content_index=0, text=text)
                emit("response.content_part.done", **at, content_index=0, part=item["content"][0])
            else:
                emit(
                    "response.output_item.added",
                    output_index=n,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                emit("response.function_call_arguments.delta", **at, delta=item["arguments"])
                emit("response.function_call_arguments.done", **at, arguments=item["arguments"])
            emit("response.output_item.done", output_index=n, item=item)
        emit("response.completed", response=full)
        return frames

    def error(self, status: int, message: str) -> dict[str, Any]:
        """OpenAI's error shape."""
        return openai_error(status, message)


DIALECT = ResponsesDialect()

__all__ = ["DIALECT", "ResponsesDialect", "output", "usage"]
