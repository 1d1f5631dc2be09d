"""A job against a dead or wrong endpoint ends at once, saying which URL and what failed,
with a non-zero exit (a resume runs it once the endpoint answers); nothing is recorded as
an episode. Before, each episode retried ~104 s with '0 errors' shown, and the job exited 0."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_sixteen_tasks_against_a_dead_endpoint_stop_before_any_episode(tmp_path: Path) -> None:
    url = _dead_url()
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "eval", str(ROOT / "environments"), "--model", url,
         "--out", str(tmp_path / "job")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    said = " ".join(done.stderr.split())
    assert done.returncode == 4, said
    assert url in said and "cannot be reached" in said and "none ran" in said
    assert "Traceback" not in said
    assert not (tmp_path / "job" / "results.jsonl").exists()
