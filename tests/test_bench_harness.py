"""bench/harness.py: its scripted model ends an episode the way each player ends one, and a
tiny run of the whole bench (one episode each way, one at once, a fast model) goes through
every section with every episode rewarded and no sandbox CPU while a frozen call is out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import harness

        yield harness
    finally:
        sys.path.remove(str(BENCH))


def _tool(name: str, command_type: str = "string") -> dict[str, Any]:
    params = {"type": "object", "properties": {"command": {"type": command_type}}}
    return {"type": "function", "function": {"name": name, "parameters": params}}


def _body(tools: list[dict[str, Any]], answered: int) -> dict[str, Any]:
    messages = [{"role": "user", "content": "go"}]
    messages += [{"role": "assistant", "content": "", "reasoning_content": "r"}] * answered
    return {"messages": messages, "tools": tools, "stream": True}


@pytest.mark.no_docker
def test_the_script_looks_solves_and_ends_as_each_player_ends(bench: ModuleType) -> None:
    loop = [_tool("bash"), _tool("write_file"), _tool("submit")]
    turns = [bench.scripted(_body(loop, k), looks=2, agent="mini-swe-agent") for k in range(4)]
    commands = [json.loads(t.tool_calls[0].arguments).get("command") for t in turns[:3]]
    assert commands == ["ls -la", "cat notes.txt", "echo 42 > answer.txt"]
    assert turns[3].tool_calls[0].name == "submit"  # the built-in loop offers submit
    mini = bench.scripted(_body([_tool("bash")], 1), looks=0, agent="mini-swe-agent")
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in mini.tool_calls[0].arguments
    codex = [_tool("shell", "array")]
    argv = bench.scripted(_body(codex, 0), looks=0, agent="codex").tool_calls[0]
    assert json.loads(argv.arguments) == {"command": ["bash", "-lc", "echo 42 > answer.txt"]}
    exec_tool = {"type": "function", "function": {"name": "exec_command", "parameters": {
        "type": "object", "properties": {"cmd": {"type": "string"}}}}}  # fmt: skip
    cmd = bench.scripted(_body([exec_tool], 0), looks=1, agent="codex").tool_calls[0]
    assert json.loads(cmd.arguments) == {"cmd": "ls -la"}
    ended = bench.scripted(_body([_tool("Bash")], 1), looks=0, agent="claude-code")
    assert ended.tool_calls == [] and ended.content
    with pytest.raises(ValueError, match="no shell tool"):
        bench.scripted(_body([_tool("read")], 0), looks=1, agent="codex")


@pytest.mark.on_docker
@pytest.mark.slow
def test_a_tiny_run_goes_through_every_section(tmp_path: Path) -> None:
    out = tmp_path / "harness.json"
    argv = [
        sys.executable, str(BENCH / "harness.py"), "--quick", "--concurrency", "1",
        "--episodes", "1", "--looks", "0", "--call-s", "0.2", "--json", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert found["errors"] == []
    assert {"share", "concurrent"} <= set(found["details"])
    share = found["details"]["share"]
    assert share["harness"]["harness_runs"][0]["exit_code"] == 0
    assert share["builtin"]["harness_runs"] == [None]
    concurrent = found["details"]["concurrent"]
    assert concurrent["frozen"]["calls"] == concurrent["running"]["calls"] == 2
    assert concurrent["frozen"]["cpu_in_calls_s"] == 0.0  # frozen: the counter did not move
    assert concurrent["running"]["frozen_share"] == 0.0  # left running: never paused
    assert any(row["what"].startswith("rollouts/s") for row in found["rows"])
