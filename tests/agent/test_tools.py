"""The tools in a real sandbox; every kind of bad call becomes an error for the model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agentenv.agent.tools import MODEL_OUTPUT_LIMIT, run_tool, tool_schemas
from agentenv.model.types import ToolCall
from agentenv.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def box() -> AsyncIterator[DockerSandbox]:
    async with await DockerSandbox.create() as sandbox:
        yield sandbox


def call(name: str, arguments: object) -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=f"functions.{name}:0", name=name, arguments=text)


def test_schemas_come_from_the_argument_models() -> None:
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas()}
    assert set(schemas) == {"bash", "read_file", "write_file", "edit_file", "submit"}
    bash = schemas["bash"]
    assert bash["description"].startswith("Run a shell command")
    assert bash["parameters"]["required"] == ["command"]
    assert bash["parameters"]["properties"]["timeout"]["default"] == 120


async def test_bash_write_read_edit_submit(box: DockerSandbox) -> None:
    wrote = await run_tool(
        box, call("write_file", {"path": "/workspace/app.py", "content": "x = 1\n"})
    )
    assert not wrote.error
    edited = await run_tool(
        box,
        call(
            "edit_file", {"path": "/workspace/app.py", "old_string": "x = 1", "new_string": "x = 2"}
        ),
    )
    assert not edited.error
    read = await run_tool(box, call("read_file", {"path": "/workspace/app.py"}))
    assert read.text == "x = 2\n"
    ran = await run_tool(box, call("bash", {"command": "python3 -c 'import app; print(app.x)'"}))
    assert ran.exit_code == 0 and ran.text.startswith("2\n") and not ran.error
    failed = await run_tool(box, call("bash", {"command": "ls /nope"}))
    assert failed.error and failed.exit_code == 2 and "No such file" in failed.text
    done = await run_tool(box, call("submit", {"summary": "set x to 2"}))
    assert done.submitted


async def test_edit_needs_exactly_one_match(box: DockerSandbox) -> None:
    await run_tool(box, call("write_file", {"path": "/workspace/dup.txt", "content": "a a"}))
    twice = await run_tool(
        box, call("edit_file", {"path": "/workspace/dup.txt", "old_string": "a", "new_string": "b"})
    )
    assert twice.error and "found 2 times" in twice.text
    none = await run_tool(
        box,
        call("edit_file", {"path": "/workspace/dup.txt", "old_string": "zzz", "new_string": "b"}),
    )
    assert none.error and "not found" in none.text
    assert (await box.read_file("/workspace/dup.txt")) == b"a a"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("bash", '{"command": "ls"', "not valid JSON"),
        ("bash", {"cmd": "ls"}, "command: Field required"),
        ("bash", {"command": "ls", "timeout": -1}, "timeout"),
        ("rm_rf", {}, "unknown tool 'rm_rf'"),
        ("read_file", {"path": "/no/such/file"}, "read_file failed"),
    ],
)
async def test_bad_calls_become_errors_for_the_model(
    box: DockerSandbox, name: str, arguments: object, expected: str
) -> None:
    result = await run_tool(box, call(name, arguments))
    assert result.error
    assert expected in result.text


async def test_timeout_is_reported_to_the_model(box: DockerSandbox) -> None:
    result = await run_tool(box, call("bash", {"command": "sleep 30", "timeout": 0.5}))
    assert result.error and "timed out after 0.5 s" in result.text


async def test_long_output_is_truncated_for_the_model_only(box: DockerSandbox) -> None:
    result = await run_tool(box, call("bash", {"command": "seq 1 20000"}))
    assert len(result.text) < MODEL_OUTPUT_LIMIT + 200
    assert "elided" in result.text and result.text.startswith("1\n")
    assert "20000" in result.text  # the tail is kept
    assert len(result.output) > 100_000 and "elided" not in result.output


async def test_a_command_that_kills_its_executor_is_a_tool_error_and_the_next_one_runs(
    box: DockerSandbox,
) -> None:
    # the command's parent is the executor that runs it
    killed = await run_tool(box, call("bash", {"command": "kill -9 $PPID; sleep 5"}))
    assert killed.error and "executor died" in killed.text
    after = await run_tool(box, call("bash", {"command": "echo alive"}))
    assert not after.error and after.text.startswith("alive")


async def test_arguments_nested_past_the_parser_are_an_error_for_the_model(
    box: DockerSandbox,
) -> None:
    bomb = "[" * 100_000 + "]" * 100_000
    result = await run_tool(box, call("bash", '{"command": ' + bomb + "}"))
    assert result.error and "not valid JSON" in result.text
