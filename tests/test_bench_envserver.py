"""bench/envserver.py: a tiny run (a handful of sessions, a short think) goes through both
sections against a real ``serve-env`` child, every step answered, every episode rewarded,
and no sandbox CPU while the sessions sit frozen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


@pytest.mark.on_docker
@pytest.mark.slow
def test_a_tiny_run_goes_through_every_section(tmp_path: Path) -> None:
    out = tmp_path / "envserver.json"
    argv = [sys.executable, str(BENCH / "envserver.py"), "--quick", "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert found["errors"] == []
    held = found["details"]["held"]
    assert held["held"] == held["sessions"] == 4
    assert held["answered"] == 3 * held["held"] and held["error_count"] == 0
    assert held["rewarded"] == held["held"]
    assert held["frozen_cpu_s"] == 0.0  # frozen: the counters did not move
    assert held["server_rss_mib"]["idle"] > 0
    steps = found["details"]["steps"]
    assert steps["in_process"]["rewarded"] == steps["server"]["rewarded"] == steps["episodes"]
    assert steps["server"]["steps_per_s"] > 0 and steps["in_process"]["steps_per_s"] > 0
    assert any(row["what"].startswith("steps/s through serve-env") for row in found["rows"])
