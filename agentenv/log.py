"""Logging. The library logs through standard-library loggers under ``agentenv`` (called
structlog-style: ``log.info("pool.discard", id=...)``) and configures nothing: a
``NullHandler`` keeps it silent until the application adds a handler, so importing agentenv
into a trainer leaves that process's logging as it was. The CLI calls :func:`configure`."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any

import structlog

_ROOT = logging.getLogger("agentenv")
_ROOT.addHandler(logging.NullHandler())
_FIELDS = "agentenv_fields"  # where a record carries the call's key-value pairs
_installed: list[logging.Handler] = []  # what configure() added, replaced by the next call


def _to_stdlib(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    message = str(event.pop("event", ""))
    return (message,), {"extra": {_FIELDS: dict(event)}}


def get_logger(name: str) -> Any:
    """The logger of module ``name``: structlog's calling style over the standard-library
    logger of that name (nothing is rendered when its level is off)."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, _to_stdlib],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


class _Console(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, _FIELDS, {})
        pairs = " ".join(
            f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in fields.items()
        )
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        return f"{stamp} [{record.levelname.lower():<7}] {record.getMessage()} {pairs}".rstrip()


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
            **getattr(record, _FIELDS, {}),
        }
        return json.dumps(line, default=str)


def configure(level: str = "warning", json_file: str | None = None) -> None:
    """For applications (the CLI): send agentenv's logs at ``level`` and above to stderr as
    readable lines, or as JSON lines into ``json_file``. Replaces what an earlier call set;
    touches no other logger."""
    while _installed:
        old = _installed.pop()
        _ROOT.removeHandler(old)
        old.close()
    handler: logging.Handler
    if json_file:
        handler = logging.FileHandler(json_file, encoding="utf-8")
        handler.setFormatter(_JsonLines())
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Console())
    _installed.append(handler)
    _ROOT.addHandler(handler)
    _ROOT.setLevel(logging.getLevelNamesMapping()[level.upper()])
    _ROOT.propagate = False  # the application's own root handlers would print it twice
