"""`agentenv run` and `agentenv serve-model`, as a user runs them: in a subprocess, against
the local K3 server over HTTP, in a real sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentenv.agent.loop import Trajectory
from agentenv.testing import K3Server, ScriptedToolCall, ScriptedTurn


def agentenv(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentenv", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def make_task(root: Path, toml: str = 'tags = ["demo"]\n') -> Path:
    task = root / "count-lines"
    (task / "workspace").mkdir(parents=True)
    (task / "workspace" / "data.txt").write_text("a\nb\nc\n")
    (task / "task.toml").write_text(toml)
    (task / "instruction.md").write_text("Write the number of lines of data.txt to count.txt.\n")
    (task / "solution.sh").write_text("wc -l < data.txt > count.txt\ncat count.txt\n")
    return task


def test_run_streams_the_episode_and_prints_the_figures(tmp_path: Path) -> None:
    script = [
        ScriptedTurn(
            reasoning="I should count the lines.",
            tool_calls=[ScriptedToolCall(name="bash", arguments='{"command": "wc -l data.txt"}')],
        ),
        ScriptedTurn(
            reasoning="Three lines.",
            content="Writing it.",
            tool_calls=[
                ScriptedToolCall(
                    name="write_file", arguments='{"path": "count.txt", "content": "3\\n"}'
                ),
                ScriptedToolCall(name="submit", arguments="{}"),
            ],
        ),
    ]
    saved = tmp_path / "traj.json"
    with K3Server(script) as server:
        done = agentenv(
            "run", str(make_task(tmp_path)), "--model", server.base_url, "-o", str(saved)
        )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "thinking: I should count the lines." in out
    assert "→ bash" in out and "3 data.txt" in out and "← write_file (ok" in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("submitted · 2 turns ·") and "cached" in summary and "$" in summary
    traj = Trajectory.model_validate_json(saved.read_text())
    assert traj.task_id == "count-lines" and traj.turns[1].tool_results[0].output.startswith(
        "wrote"
    )
    assert traj.turns[0].completion.token_ids  # the local server is self-hosted: ids come back


def test_run_with_the_oracle_and_bad_input(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    done = agentenv("run", str(task), "--model", "oracle")
    assert done.returncode == 0, done.stderr
    assert "← bash (ok, exit 0" in done.stdout and "  3" in done.stdout

    bad = make_task(tmp_path / "bad", toml="[limits]\nmax_turns = 'many'\n")
    done = agentenv("run", str(bad), "--model", "oracle")
    assert done.returncode == 2
    assert "task.toml" in done.stderr and "limits.max_turns" in done.stderr
    assert "Traceback" not in done.stderr

    env = {k: v for k, v in os.environ.items() if k != "MOONSHOT_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "run", str(task), "--model", "kimi-k3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2 and "MOONSHOT_API_KEY" in done.stderr

    done = agentenv("run", "--model", "oracle")
    assert done.returncode == 2 and "task folder" in done.stderr


def test_serve_model_serves_a_script_until_stopped(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"reasoning": "r", "content": "from the script"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenv", "serve-model", "--script", str(script), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = first.split(" at ")[1].split()[0]
        done = agentenv("run", "--instruction", "say hi", "--model", url)
        assert done.returncode == 0, done.stderr
        assert "from the script" in done.stdout and "no_tool_calls" in done.stdout
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_jobs_without_a_key_fail_before_touching_anything(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MOONSHOT_API_KEY"}
    root = Path(__file__).resolve().parent.parent
    subprocess.run(["git", "init", "-q", str(tmp_path / "repos" / "a")], check=True)
    for args in (
        ["eval", str(root / "environments" / "text-stats"), "--out", str(tmp_path / "e")],
        [
            "refactor",
            "--repos",
            str(tmp_path / "repos"),
            "--instruction",
            "x",
            "--out",
            str(tmp_path / "r"),
        ],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "agentenv", *args, "--model", "kimi-k3"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 2 and "MOONSHOT_API_KEY" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "e").exists() and not (tmp_path / "r").exists()
