"""Logging setup: readable lines on the console (stderr); JSON lines when asked for a file."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import structlog


def configure(level: str = "warning", json_file: str | None = None) -> None:
    """Route structlog to stderr at ``level``, or as JSON lines into ``json_file``."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    stream: TextIO
    if json_file:
        renderer: structlog.typing.Processor = structlog.processors.JSONRenderer()
        stream = open(json_file, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        stream = sys.stderr
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )


def configure_default() -> None:
    """Unless the application configured structlog itself, send our logs to stderr at
    warning level: structlog's own default prints everything to stdout, which would mix
    with a program's output."""
    if not structlog.is_configured():
        configure(os.environ.get("AGENTENV_LOG_LEVEL", "warning"))
