"""`agentenv eval --agent NAME` end to end through the real CLI: mini-swe-agent installed into
the task's image plays the episode, its model calls through the gateway to a scripted
K3-compatible server; the hidden verifier grades the final state as for the built-in loop
(the scripted solution 1.0, the null script 0). And what is refused before any episode: an
unknown agent (the known ones listed), a multi-step task, the oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentenv.runner.results import load_results
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn
from agentenv.view import build_site
from tests.formats.test_harbor_steps import two_steps

ENV = {**os.environ, "COLUMNS": "200"}
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # how mini-swe-agent is told it is done


def agentenv(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The real CLI, in a child process (as a user runs it)."""
    argv = [sys.executable, "-m", "agentenv", *args]
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=timeout)


def answer_task(root: Path, name: str = "answer") -> Path:
    """A task folder: write ok into answer.txt, graded by a hidden file check."""
    folder = root / name
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "README").write_text("write ok into answer.txt\n")
    (folder / "instruction.md").write_text("Write ok into answer.txt.\n")
    (folder / "task.toml").write_text(
        '[limits]\nmax_turns = 6\n[verifier]\nkind = "file"\npath = "answer.txt"\nequals = "ok"\n'
    )
    return folder


def bash(command: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="bash", arguments=json.dumps({"command": command}))


def _answered(body: dict[str, Any]) -> int:
    return sum(m.get("role") == "assistant" for m in body["messages"])


def solving(body: dict[str, Any]) -> ScriptedTurn:
    """Write the answer, then submit (by the request alone: concurrent episodes interleave)."""
    if _answered(body) == 0:
        return ScriptedTurn(reasoning="Write it.", tool_calls=[bash("echo ok > answer.txt")])
    return ScriptedTurn(reasoning="Done.", tool_calls=[bash(SUBMIT)])


def null(body: dict[str, Any]) -> ScriptedTurn:
    """Submit at once, having done nothing."""
    return ScriptedTurn(reasoning="Nothing to do.", tool_calls=[bash(SUBMIT)])


@pytest.mark.on_docker
def test_eval_with_mini_swe_agent_grades_the_harness_episode(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    answer_task(tasks)
    urls = {}
    for script, reward, name in ((solving, 1.0, "solved"), (null, 0.0, "null")):
        job = tmp_path / name
        with K3Server(script) as server:
            urls[name] = server.base_url
            done = agentenv(
                "--backend", "docker", "eval", str(tasks), "--model", server.base_url,
                "--agent", "mini-swe-agent", "--out", str(job),
            )  # fmt: skip
            assert done.returncode == 0, done.stderr + done.stdout
            calls = len(server.requests)
        assert "played by mini-swe-agent" in done.stdout
        [result] = load_results(job).values()
        assert result.outcome == "graded" and result.reward == reward, result
        assert result.agent == "mini-swe-agent"
        assert result.stop_reason == "harness_exited"
        traj = json.loads((job / result.trajectory).read_text())  # type: ignore[operator]
        assert len(traj["turns"]) == calls == (2 if reward else 1)
        assert traj["harness"]["name"] == "mini-swe-agent"
        assert traj["harness"]["exit_code"] == 0 and traj["harness"]["stopped"] is None
        assert traj["paused_s"] > 0  # frozen during each model call
        # the harness's conversation as it sent it: its own system prompt, not agentenv's
        assert "helpful assistant" in traj["messages"][0]["content"]
        assert json.loads((job / "config.json").read_text())["agent"] == "mini-swe-agent"
        summary = json.loads((job / "summary.json").read_text())
        assert {row["agent"] for row in summary} == {"mini-swe-agent"}
    # the viewer: the harness episode's turns like any other's, then how the harness ran
    build_site(tmp_path / "solved", tmp_path / "site")
    page = (tmp_path / "site" / "episodes" / "answer--0.html").read_text()
    assert page.count("<h3>turn ") == 2 and "played by mini-swe-agent" in page
    harness = page[page.index("<h2>harness</h2>") : page.index("<h2>verification</h2>")]
    assert "mini-swe-agent 2.4.6 · exit 0 · ended by itself" in harness
    report = agentenv("report", str(tmp_path / "solved"))
    assert report.returncode == 0 and "played by mini-swe-agent" in report.stdout
    # a resume must play with the same agent: the built-in loop is refused on that folder
    other = agentenv(
        "--backend", "docker", "eval", str(tasks), "--model", urls["solved"], "--out",
        str(tmp_path / "solved"),
    )  # fmt: skip
    assert other.returncode == 2, other.stderr
    assert "agent: 'mini-swe-agent' then, None now" in other.stderr


@pytest.mark.no_docker
def test_an_unknown_agent_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    answer_task(tasks)
    done = agentenv("eval", str(tasks), "--model", "null", "--agent", "nope", "--out",
                    str(tmp_path / "job"))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "unknown agent 'nope'" in done.stderr
    for known in ("mini-swe-agent", "codex", "claude-code"):
        assert known in done.stderr
    assert not (tmp_path / "job").exists()  # nothing ran, nothing written
    ran = agentenv("run", str(tasks / "answer"), "--model", "null", "--agent", "nope")
    assert ran.returncode == 2 and "unknown agent 'nope'" in ran.stderr
    refactor = agentenv("refactor", "--repos", str(tmp_path), "--instruction", "x", "--model",
                        "null", "--agent", "nope", "--out", str(tmp_path / "r"))  # fmt: skip
    assert refactor.returncode == 2 and "unknown agent 'nope'" in refactor.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.no_docker
def test_a_multi_step_task_and_the_oracle_are_refused_with_a_harness(tmp_path: Path) -> None:
    steps = two_steps(tmp_path, "two")
    done = agentenv("eval", str(steps), "--model", "null", "--agent", "mini-swe-agent",
                    "--out", str(tmp_path / "job"))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "task 'two-steps' has steps" in done.stderr and "mini-swe-agent" in done.stderr
    assert not (tmp_path / "job" / "results.jsonl").exists()
    oracle = agentenv("eval", str(answer_task(tmp_path / "tasks")), "--model", "oracle",
                      "--agent", "mini-swe-agent", "--out", str(tmp_path / "o"))  # fmt: skip
    assert oracle.returncode == 2 and "--model oracle" in oracle.stderr, oracle.stderr


def codex_solving(body: dict[str, Any]) -> ScriptedTurn:
    """Codex's shell tool writes the answer; then a turn without tool calls ends it."""
    if _answered(body) == 0:
        call = ScriptedToolCall(
            name="exec_command", arguments=json.dumps({"cmd": "echo ok > answer.txt"})
        )
        return ScriptedTurn(reasoning="Write it.", tool_calls=[call])
    return ScriptedTurn(reasoning="Done.", content="ok is in answer.txt.")


@pytest.mark.on_docker
def test_eval_with_codex_grades_the_harness_episode(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    answer_task(tasks)
    with K3Server(codex_solving) as server:
        done = agentenv(
            "--backend", "docker", "eval", str(tasks), "--model", server.base_url,
            "--agent", "codex", "--out", str(tmp_path / "job"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + done.stdout
    [result] = load_results(tmp_path / "job").values()
    assert result.outcome == "graded" and result.reward == 1.0, result
    assert result.agent == "codex" and result.stop_reason == "harness_exited"
    traj = json.loads((tmp_path / "job" / str(result.trajectory)).read_text())
    assert traj["turns"][0]["completion"]["tool_calls"][0]["name"] == "exec_command"
    assert traj["harness"]["exit_code"] == 0 and traj["paused_s"] > 0
