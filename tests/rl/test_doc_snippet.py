"""The whole script in docs/rl.md's "Rollouts" runs as written: taken from the doc, pointed
at the local K3-compatible server (what `agentenv serve-model` serves), run as a script."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from agentenv.testing import K3Server
from agentenv.testing.k3server import DEMO_SCRIPT

ROOT = Path(__file__).resolve().parents[2]
DOC_URL = "http://127.0.0.1:8000/v1"


def _rollout_script() -> str:
    doc = (ROOT / "docs" / "rl.md").read_text()
    section = doc.split("\n## Rollouts\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "docs/rl.md's Rollouts section has no python block"
    script: str = blocks[0]
    assert "anyio.run(main)" in script and DOC_URL in script
    return script


def test_the_rollout_script_in_the_doc_runs(tmp_path: Path) -> None:
    script = _rollout_script()
    with K3Server(DEMO_SCRIPT) as server:
        path = tmp_path / "rollout.py"
        path.write_text(script.replace(DOC_URL, server.base_url))
        done = subprocess.run(
            [sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "reward 0.0"  # the scripted model only looks around
    assert any(line.startswith("outputs ") for line in lines[1:]), done.stdout
