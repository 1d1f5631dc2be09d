"""The agent's tools, each defined once by a pydantic argument model: the JSON schema sent to
the model comes from it, and the model's arguments are validated against it.

Whatever goes wrong with a tool call (malformed JSON, an unknown tool, invalid arguments, a
tool that raises, a command that times out) becomes a :class:`ToolResult` with
``error=True`` whose text goes back to the model; the episode goes on.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agentenv.model.types import ToolCall
from agentenv.sandbox.errors import (
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
from agentenv.sandbox.executor_server import HeadTail
from agentenv.sandbox.protocol import Sandbox

MODEL_OUTPUT_LIMIT = 16_000
"""Characters of a tool's output shown to the model (head and tail kept); the trajectory
keeps it all."""


class BashArgs(BaseModel):
    """Run a shell command in the sandbox's working directory."""

    command: str = Field(description="the command, run by bash")
    timeout: float = Field(120, gt=0, le=3600, description="seconds before it is killed")


class ReadFileArgs(BaseModel):
    """Read a text file."""

    path: str = Field(description="absolute, or relative to the working directory")


class WriteFileArgs(BaseModel):
    """Create or overwrite a file with the given content."""

    path: str
    content: str


class EditFileArgs(BaseModel):
    """Replace one exact occurrence of old_string with new_string in a file."""

    path: str
    old_string: str = Field(min_length=1)
    new_string: str


class SubmitArgs(BaseModel):
    """Say the task is done; nothing runs after this."""

    summary: str = Field("", description="what was done, in a sentence or two")


class ToolResult(BaseModel):
    """What a tool call gave: ``text`` for the model (truncated), ``output`` in full."""

    call_id: str
    name: str
    text: str
    output: str
    error: bool = False
    exit_code: int | None = None
    submitted: bool = False
    duration_s: float = 0.0


Runner = Callable[[Sandbox, Any], Awaitable[ToolResult]]


def _shown(text: str) -> str:
    """Head and tail of ``text`` for the model, with a marker where the middle was."""
    if len(text) <= MODEL_OUTPUT_LIMIT:
        return text
    kept = HeadTail(MODEL_OUTPUT_LIMIT)
    kept.add(text.encode())
    return kept.value().decode(errors="replace")


def _result(call: ToolCall, output: str, **fields: Any) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, text=_shown(output), output=output, **fields)


async def _bash(box: Sandbox, args: BashArgs) -> tuple[str, dict[str, Any]]:
    result = await box.exec(args.command, timeout=args.timeout)
    output = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
    if result.timed_out:
        output += f"\n[timed out after {args.timeout:g} s; the command was killed]"
    output += f"\n[exit code {result.exit_code}]"
    return output, {"exit_code": result.exit_code, "error": not result.ok}


async def _read(box: Sandbox, args: ReadFileArgs) -> tuple[str, dict[str, Any]]:
    return (await box.read_file(args.path)).decode(errors="replace"), {}


async def _write(box: Sandbox, args: WriteFileArgs) -> tuple[str, dict[str, Any]]:
    await box.write_file(args.path, args.content.encode())
    return f"wrote {len(args.content.encode())} bytes to {args.path}", {}


async def _edit(box: Sandbox, args: EditFileArgs) -> tuple[str, dict[str, Any]]:
    text = (await box.read_file(args.path)).decode()
    count = text.count(args.old_string)
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times; include more context"
        return f"edit_file: old_string {where} in {args.path}; nothing changed", {"error": True}
    await box.write_file(args.path, text.replace(args.old_string, args.new_string).encode())
    return f"edited {args.path}", {}


async def _submit(box: Sandbox, args: SubmitArgs) -> tuple[str, dict[str, Any]]:
    return "submitted", {"submitted": True}


TOOLS: dict[
    str, tuple[type[BaseModel], Callable[[Sandbox, Any], Awaitable[tuple[str, dict[str, Any]]]]]
] = {
    "bash": (BashArgs, _bash),
    "read_file": (ReadFileArgs, _read),
    "write_file": (WriteFileArgs, _write),
    "edit_file": (EditFileArgs, _edit),
    "submit": (SubmitArgs, _submit),
}


@functools.cache
def tool_schemas(names: tuple[str, ...] = tuple(TOOLS)) -> list[dict[str, Any]]:
    """The ``tools`` field of a chat request, from the argument models. Built once per set of
    names (it costs ~2 ms, and the loop asks every turn); treat the result as read-only."""
    schemas = []
    for name in names:
        model, _ = TOOLS[name]
        parameters = model.model_json_schema()
        parameters.pop("title", None)
        description = parameters.pop("description", "")
        schemas.append(
            {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            }
        )
    return schemas


async def run_tool(box: Sandbox, call: ToolCall) -> ToolResult:
    """Run one tool call. Problems become error results for the model; only a sandbox that
    is gone (:class:`SandboxUnavailable`) is raised, since the episode cannot go on."""
    started = time.monotonic()
    result = await _run_tool(box, call)
    result.duration_s = time.monotonic() - started
    return result


async def _run_tool(box: Sandbox, call: ToolCall) -> ToolResult:
    if call.name not in TOOLS:
        return _result(
            call, f"unknown tool {call.name!r}; the tools are: {', '.join(TOOLS)}", error=True
        )
    model, fn = TOOLS[call.name]
    try:
        raw = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError) as e:  # not JSON, or nested past the parser's depth
        return _result(
            call,
            f"arguments of {call.name} are not valid JSON ({e}); send a JSON object",
            error=True,
        )
    try:
        args = model.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors()
        )
        return _result(call, f"invalid arguments for {call.name}: {problems}", error=True)
    try:
        output, fields = await fn(box, args)
    except (SandboxUnavailable, SandboxClosed, SandboxPaused):
        raise
    except SandboxError as e:
        # e.g. the command killed its own executor: the sandbox lives, a new one starts
        return _result(call, f"{call.name} failed: {e}", error=True)
    except (OSError, UnicodeDecodeError) as e:
        return _result(call, f"{call.name} failed: {e}", error=True)
    return _result(call, output, **fields)
