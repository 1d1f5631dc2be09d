"""`agentenv sandbox ls` never cuts a sandbox's id, in a pipe or in a narrow terminal: the
id is what a person copies into `docker` or `agentenv` commands."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest

from agentenv import sandbox

pytestmark = pytest.mark.anyio


def _ls_in_a_pipe() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agentenv", "sandbox", "ls"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _ls_in_a_terminal() -> str:
    """What `sandbox ls` prints to a terminal 80 columns wide (a pseudo-terminal)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "80", "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentenv", "sandbox", "ls"],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait() == 0, proc.stderr.read() if proc.stderr else ""
    text = b"".join(chunks).decode(errors="replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r\n", "\n")  # no colours


async def test_the_id_is_whole_in_a_pipe_and_in_a_narrow_terminal() -> None:
    async with sandbox() as box:
        short = box.id[:12]  # what docker prints, and accepts
        piped = _ls_in_a_pipe()
        assert short in piped, piped
        shown = _ls_in_a_terminal()
        assert short in shown, shown
        widths = {len(line) for line in shown.splitlines() if "┃" in line or "│" in line}
        assert max(widths) <= 80  # the terminal's width is kept: other columns give way
