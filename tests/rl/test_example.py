"""examples/rl_loop.py runs end to end: group rollouts, a suspended weight update with no
sandbox CPU, and resumed episodes stamped with the new version."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_rl_loop_example() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "rl_loop.py"),
            "--steps",
            "2",
            "--group",
            "2",
            "--prompts",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert (
        len(
            re.findall(r"^step \d \(weights v\d\): mean reward \d\.\d\d over 4 rollouts", out, re.M)
        )
        == 2
    )
    cpu = float(re.search(r"during an update: ([\d.]+) ms of CPU", out).group(1))  # type: ignore[union-attr]
    assert cpu < 5.0  # frozen: (almost) nothing ran while suspended
    assert "policy version of each turn: [[3, 4], [3, 4]]" in out
