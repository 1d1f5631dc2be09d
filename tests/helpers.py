"""Helpers shared by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from agentenv.model import OpenAIChatModel
from agentenv.sandbox import cgroup
from agentenv.testing import K3Server
from agentenv.testing.k3server import IN_PROCESS_URL

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


def frozen(container_id: str) -> bool:
    """Whether the container's cgroup is frozen, read from the host (a paused sandbox: the
    engine calls one frozen directly "running")."""
    path = cgroup.freezer(container_id)
    return path is not None and cgroup.is_frozen(path)


def start_script(script: str, run_id: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``script`` in a new Python process under its own run id; return the process and
    the first line it prints (failing with its stderr if it prints none)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AGENTENV_RUN_ID": run_id, "PYTHONFAULTHANDLER": "1"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        pytest.fail(f"the script printed nothing: {proc.stderr.read()}")
    return proc, line


@contextmanager
def serving(server: K3Server, transport: str) -> Iterator[K3Server]:
    """``server`` listening on loopback (``http``), or answering in process (no socket)."""
    if transport == "http":
        with server:
            yield server
    else:
        yield server


def chat_model(server: K3Server, transport: str, **kwargs: Any) -> OpenAIChatModel:
    """The real client, speaking to ``server`` over ``transport``."""
    if transport == "http":
        return OpenAIChatModel(base_url=server.base_url, api_key="k", **kwargs)
    client = server.http_client()
    return OpenAIChatModel(base_url=IN_PROCESS_URL, api_key="k", http_client=client, **kwargs)
