"""``agentenv``: the command line, one module per command group. Thin: every command calls
the library and prints."""

from __future__ import annotations

import os
import signal

from agentenv.cli._app import app

# each module adds its commands to the app: this is the order of `agentenv --help`
# isort: off
from agentenv.cli import evals  # noqa: F401
from agentenv.cli import refactor  # noqa: F401
from agentenv.cli import episode  # noqa: F401
from agentenv.cli import view  # noqa: F401
from agentenv.cli import validate  # noqa: F401
from agentenv.cli import machine  # noqa: F401
from agentenv.cli import serve_env  # noqa: F401

# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``agentenv`` script."""
    # SIGTERM takes SIGINT's path: inside the event loop that cancels the main task (so
    # context managers remove their sandboxes); raising from the handler would interrupt
    # whatever line happened to run, event-loop internals included.
    if os.name == "posix":
        # A non-interactive shell starts `cmd &` with SIGINT ignored; SIGTERM must still work.
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    app()
