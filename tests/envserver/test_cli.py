"""``agentenv serve-env`` without its optional dependency fails fast, naming the command
that installs it, before it loads a task or binds a port."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.no_docker

WITHOUT_WEBSOCKETS = (
    "import sys; sys.modules['websockets'] = None; "  # `import websockets` raises ImportError
    "sys.argv = ['agentenv', 'serve-env', 'no-such-folder']; "
    "from agentenv.cli import main; main()"
)


def test_serve_env_without_websockets_names_the_install_command() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_WEBSOCKETS], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "pip install 'agentenv[serve-env]'" in done.stderr
    assert "no-such-folder" not in done.stderr  # nothing loaded before the check
