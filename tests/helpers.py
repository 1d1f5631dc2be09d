"""Helpers shared by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# An assistant tool-call turn sent back without its reasoning_content: K3 answers 400.
HISTORY_WITHOUT_REASONING = [
    {"role": "user", "content": "x"},
    {
        "role": "assistant",
        "content": "calling",
        "tool_calls": [
            {
                "id": "functions.bash:0",
                "type": "function",
                "function": {"name": "bash", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "functions.bash:0", "content": "ok"},
]


def start_script(script: str, run_id: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``script`` in a new Python process under its own run id; return the process and
    the first line it prints (failing with its stderr if it prints none)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AGENTENV_RUN_ID": run_id},
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        pytest.fail(f"the script printed nothing: {proc.stderr.read()}")
    return proc, line
