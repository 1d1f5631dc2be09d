"""The agent's tools, each defined once by a pydantic argument model: the JSON schema sent to
the model comes from it, and the model's arguments are validated against it.

Whatever goes wrong with a tool call (malformed JSON, an unknown tool, invalid arguments, a
tool that raises, a command that times out) becomes a :class:`ToolResult` with
``error=True`` whose text goes back to the model; the episode goes on.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agentenv.guest.executor import HeadTail
from agentenv.model.types import ToolCall
from agentenv.sandbox.errors import (
    SandboxClosed,
    SandboxError,
    SandboxPaused,
    SandboxUnavailable,
)
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


class ToolOutput(BaseModel):
    """What a tool's ``run`` returns when plain text is not enough."""

    text: str
    error: bool = False  # the call failed: said so to the model, the episode goes on
    exit_code: int | None = None
    submitted: bool = False  # the agent says it is done: the episode ends after this turn


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its ``name``, the pydantic model of its arguments (whose
    docstring is the description the model sees, and whose fields are the JSON schema),
    and ``run(sandbox, args)``, which returns text or a :class:`ToolOutput`. The loop builds
    both the request's ``tools`` field and the dispatch from one list of these, so what the
    model is shown and what runs cannot disagree.

    A tool whose schema is not a pydantic model's (one of an MCP server,
    :mod:`agentenv.agent.mcp`) gives its ``description`` and ``parameters`` (the JSON
    schema, as a JSON string so that the tool stays hashable) instead; its ``args`` then
    only has to accept what that schema allows."""

    name: str
    args: type[BaseModel]
    run: Callable[[Sandbox, Any], Awaitable[str | ToolOutput]]
    description: str | None = None
    parameters: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"tool name {self.name!r}: 1 to 64 of a-z, A-Z, 0-9, _ and -")

    def schema(self) -> dict[str, Any]:
        """The tool's entry in a chat request's ``tools`` field."""
        if self.parameters is not None:
            parameters = json.loads(self.parameters)
        else:
            parameters = self.args.model_json_schema()
            parameters.pop("title", None)
        description = parameters.pop("description", "")
        if self.description is not None:
            description = self.description
        return {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": parameters},
        }


_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _shown(text: str) -> str:
    """Head and tail of ``text`` for the model, with a marker where the middle was."""
    if len(text) <= MODEL_OUTPUT_LIMIT:
        return text
    kept = HeadTail(MODEL_OUTPUT_LIMIT)
    kept.add(text.encode())
    return kept.value().decode(errors="replace")


def _result(call: ToolCall, output: str, **fields: Any) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, text=_shown(output), output=output, **fields)


async def _bash(box: Sandbox, args: BashArgs) -> ToolOutput:
    result = await box.exec(args.command, timeout=args.timeout)
    output = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
    if result.timed_out:
        output += f"\n[timed out after {args.timeout:g} s; the command was killed]"
    output += f"\n[exit code {result.exit_code}]"
    return ToolOutput(text=output, exit_code=result.exit_code, error=not result.ok)


async def _read(box: Sandbox, args: ReadFileArgs) -> str:
    return (await box.read_file(args.path)).decode(errors="replace")


async def _write(box: Sandbox, args: WriteFileArgs) -> str:
    await box.write_file(args.path, args.content.encode())
    return f"wrote {len(args.content.encode())} bytes to {args.path}"


async def _edit(box: Sandbox, args: EditFileArgs) -> str | ToolOutput:
    text = (await box.read_file(args.path)).decode()
    count = text.count(args.old_string)
    if count != 1:
        where = "not found" if count == 0 else f"found {count} times; include more context"
        return ToolOutput(
            text=f"edit_file: old_string {where} in {args.path}; nothing changed", error=True
        )
    await box.write_file(args.path, text.replace(args.old_string, args.new_string).encode())
    return f"edited {args.path}"


async def _submit(box: Sandbox, args: SubmitArgs) -> ToolOutput:
    return ToolOutput(text="submitted", submitted=True)


BASH = Tool("bash", BashArgs, _bash)
READ_FILE = Tool("read_file", ReadFileArgs, _read)
WRITE_FILE = Tool("write_file", WriteFileArgs, _write)
EDIT_FILE = Tool("edit_file", EditFileArgs, _edit)
SUBMIT = Tool("submit", SubmitArgs, _submit)
DEFAULT_TOOLS: tuple[Tool, ...] = (BASH, READ_FILE, WRITE_FILE, EDIT_FILE, SUBMIT)
"""The tools an episode gets unless it is given others (a task's ``tools = [...]``)."""
BUILTIN: dict[str, Tool] = {tool.name: tool for tool in DEFAULT_TOOLS}


def tools_named(names: Sequence[str]) -> tuple[Tool, ...]:
    """The built-in tools of these names, in this order; raises ``ValueError`` naming an
    unknown or repeated one."""
    seen: set[str] = set()
    for name in names:
        if name not in BUILTIN:
            raise ValueError(f"unknown tool {name!r}; the tools are: {', '.join(BUILTIN)}")
        if name in seen:
            raise ValueError(f"tool {name!r} is named twice")
        seen.add(name)
    return tuple(BUILTIN[name] for name in names)


@functools.lru_cache(maxsize=256)  # bounded: each episode with MCP servers makes new tools
def _schemas(tools: tuple[Tool, ...]) -> list[dict[str, Any]]:
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"two tools share a name: {names}")
    return [tool.schema() for tool in tools]


def tool_schemas(tools: Sequence[Tool] = DEFAULT_TOOLS) -> list[dict[str, Any]]:
    """The ``tools`` field of a chat request for ``tools``. Built once per tool list (it
    costs ~2 ms, and the loop asks every turn); treat the result as read-only."""
    return _schemas(tuple(tools))


async def run_tool(
    box: Sandbox, call: ToolCall, tools: Sequence[Tool] = DEFAULT_TOOLS
) -> ToolResult:
    """Run one tool call with the tool of its name among ``tools``. Problems become error
    results for the model (a tool not among them, bad JSON, invalid arguments, a tool that
    raises); only a sandbox that is gone (:class:`SandboxUnavailable`, closed, paused) is
    raised, since the episode cannot go on."""
    started = time.monotonic()
    result = await _run_tool(box, call, {tool.name: tool for tool in tools})
    result.duration_s = time.monotonic() - started
    return result


async def _run_tool(box: Sandbox, call: ToolCall, tools: dict[str, Tool]) -> ToolResult:
    tool = tools.get(call.name)
    if tool is None:
        return _result(
            call, f"unknown tool {call.name!r}; the tools are: {', '.join(tools)}", error=True
        )
    try:
        raw = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError) as e:  # not JSON, or nested past the parser's depth
        return _result(
            call,
            f"arguments of {call.name} are not valid JSON ({e}); send a JSON object",
            error=True,
        )
    try:
        args = tool.args.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors()
        )
        return _result(call, f"invalid arguments for {call.name}: {problems}", error=True)
    try:
        output = await tool.run(box, args)
    except (SandboxUnavailable, SandboxClosed, SandboxPaused):
        raise
    except SandboxError as e:
        # e.g. the command killed its own executor: the sandbox lives, a new one starts
        return _result(call, f"{call.name} failed: {e}", error=True)
    except (OSError, UnicodeDecodeError) as e:
        return _result(call, f"{call.name} failed: {e}", error=True)
    if isinstance(output, str):
        return _result(call, output)
    return _result(call, output.text, **output.model_dump(exclude={"text"}))
