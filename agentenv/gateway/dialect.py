"""The seam between the gateway and the APIs harnesses speak: a :class:`Dialect` reads a
harness's request into a :class:`Call` (the loop's chat-completions terms) and writes the
model's :class:`~agentenv.model.types.Completion` back in the harness's own API, whole or as
server-sent events. One file a dialect; :func:`dialect` finds them by name."""

from __future__ import annotations

import importlib
import json
from typing import Any, Protocol

from pydantic import BaseModel

from agentenv.model.types import Completion

# name -> the module holding its ``DIALECT``; imported on first use
_MODULES = {
    "chat": "agentenv.gateway.chat",
    "anthropic": "agentenv.gateway.anthropic",
    "responses": "agentenv.gateway.responses",
}


class Call(BaseModel):
    """A harness's model request in the loop's terms."""

    # OpenAI chat form (system/user/assistant/tool); assistant turns carry reasoning_content
    # where the harness kept it
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]  # chat-completions tool schemas
    stream: bool
    model: str


class DialectError(Exception):
    """A request the dialect cannot read: answered 400 in the dialect's own error shape."""


class Dialect(Protocol):
    """One API a harness may speak, translated to and from the loop's terms."""

    name: str  # "chat" | "responses" | "anthropic"
    paths: tuple[str, ...]  # the POST paths it answers

    def parse(self, body: dict[str, Any]) -> Call:
        """The request ``body`` as a :class:`Call`; raises :class:`DialectError`."""
        ...

    def answer(self, done: Completion, call: Call) -> dict[str, Any]:
        """The non-streamed response body for ``done``."""
        ...

    def events(self, done: Completion, call: Call) -> list[bytes]:
        """The streamed response for ``done``: server-sent event frames, in order."""
        ...

    def error(self, status: int, message: str) -> dict[str, Any]:
        """An error body of this API."""
        ...


def dialect(name: str) -> Dialect:
    """The dialect called ``name``; ``ValueError`` naming the known ones otherwise."""
    module = _MODULES.get(name)
    if module is None:
        raise ValueError(f"no gateway dialect {name!r}; known: {', '.join(sorted(_MODULES))}")
    found: Dialect = importlib.import_module(module).DIALECT
    return found


def dialect_names() -> list[str]:
    """The names :func:`dialect` knows."""
    return sorted(_MODULES)


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    """One server-sent event frame carrying ``data`` as JSON (named ``event`` if given)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def text_of(content: Any, where: str) -> str:
    """The text of a message ``content`` given as a string, ``None``, or a list of text
    parts (``{"type": "text"|"input_text"|"output_text", "text": ...}``); other parts
    (images, audio, files) raise :class:`DialectError` naming ``where``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise DialectError(f"{where}: content must be a string or a list of parts")
    texts = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            raise DialectError(
                f"{where}: content part {i} is of type {kind!r}; only text is supported "
                "(the routed model takes text)"
            )
    return "".join(texts)


def require(body: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``body[key]``, checked to be a ``kind``; a :class:`DialectError` naming it otherwise."""
    if key not in body:
        raise DialectError(f"{where}: the field {key!r} is required")
    value = body[key]
    if not isinstance(value, kind):
        raise DialectError(f"{where}: {key!r} has the wrong type ({type(value).__name__})")
    return value


__all__ = [
    "Call",
    "Dialect",
    "DialectError",
    "dialect",
    "dialect_names",
    "require",
    "sse",
    "text_of",
]
