"""Harbor's ``[[environment.mcp_servers]]`` → the task's ``mcp_servers``
(:mod:`agentenv.agent.mcp`): an ``sse`` or ``streamable-http`` (``http``) server at a
service of the task's compose file, and a ``stdio`` server (``command`` + ``args`` run in
the sandbox, its stdio carried over the engine's exec) are honoured, their tools given to
the model beside the built-in ones. Refused at load, naming the field: a URL whose host is
not a compose service (agentenv reaches a server only on the task's private network, never
by giving the sandbox a network), and what Harbor's own model refuses (no url, no command
for stdio, headers or a url on stdio, a credential written in a header rather than named
as ``${VAR}``, two servers of one name)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentenv.formats.harbor.compose import LOAD_PROJECT, compose_file, variables
from agentenv.formats.harbor.refused import Bad
from agentenv.sandbox.compose import ComposeError, read_compose

FIELD = "environment.mcp_servers"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "x-api-key", "api-key")
_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")


def mcp_fields(env: dict[str, Any], folder: Path, bad: Bad) -> dict[str, Any]:
    """The ``mcp_servers`` field of the task's ``[environment]`` table ``env`` (``{}``
    without servers); each problem through ``bad``."""
    given = env.get("mcp_servers")
    if given in (None, []):
        return {}
    if not isinstance(given, list) or not all(isinstance(s, dict) for s in given):
        bad(FIELD, "must be an array of tables ([[environment.mcp_servers]])")
        return {}
    services = _services(folder)
    servers, names = [], set()
    for i, raw in enumerate(given):
        server = _server(raw, f"{FIELD}[{i}]", services, bad)
        if server is None:
            continue
        if server["name"] in names:
            bad(f"{FIELD}[{i}].name", f"{server['name']!r} names two servers")
        names.add(server["name"])
        servers.append(server)
    return {"mcp_servers": servers}


def _server(raw: dict[str, Any], where: str, services: set[str], bad: Bad) -> dict[str, Any] | None:
    name, url = raw.get("name"), raw.get("url")
    transport = raw.get("transport", "sse")  # Harbor's default
    transport = "streamable-http" if transport == "http" else transport
    if not isinstance(name, str) or not name:
        bad(f"{where}.name", "every MCP server needs a name (a string)")
        return None
    if transport == "stdio":
        return _stdio(raw, name, where, bad)
    if transport not in ("sse", "streamable-http"):
        bad(f"{where}.transport", f"{transport!r} is not one of stdio, sse, streamable-http")
        return None
    if "command" in raw or "args" in raw:
        bad(f"{where}.command", f"is for stdio servers, not {transport!r} ones")
    if not isinstance(url, str) or not re.match(r"https?://", url):
        bad(f"{where}.url", f"{url!r}: an {transport} server needs an http(s) url")
        return None
    host = urlsplit(url).hostname or ""
    if host not in services:
        known = ", ".join(sorted(services)) or "none: the task has no docker-compose.yaml"
        bad(
            f"{where}.url",
            f"{url}: agentenv reaches MCP servers only at a service of the task's compose "
            f"file (its services: {known})",
        )
        return None
    return {"name": name, "transport": transport, "url": url, "headers": _headers(raw, where, bad)}


def _stdio(raw: dict[str, Any], name: str, where: str, bad: Bad) -> dict[str, Any] | None:
    """A stdio server: run in the sandbox, so no url (nothing to reach) and no headers."""
    command, args = raw.get("command"), raw.get("args", [])
    ok = True
    if not isinstance(command, str) or not command:
        bad(f"{where}.command", f"a stdio server ({name!r}) needs a command (a string)")
        ok = False
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        bad(f"{where}.args", "must be an array of strings")
        ok = False
    for key in ("url", "headers"):
        if raw.get(key):
            bad(f"{where}.{key}", "is for sse and streamable-http servers, not stdio ones")
            ok = False
    if not ok:
        return None
    return {"name": name, "transport": "stdio", "command": command, "args": args}


def _headers(raw: dict[str, Any], where: str, bad: Bad) -> dict[str, str]:
    headers = raw.get("headers", {})
    if not isinstance(headers, dict):
        bad(f"{where}.headers", "must be a table of HTTP headers")
        return {}
    kept: dict[str, str] = {}
    for key, value in headers.items():
        field = f"{where}.headers.{key}"
        if not _HEADER_NAME.fullmatch(str(key)) or not isinstance(value, str):
            bad(field, "is not an HTTP header name with a string value")
        elif "\r" in value or "\n" in value:
            bad(field, "must not hold a newline")
        elif str(key).lower() in _SECRET_HEADERS and not _VARIABLE.search(value):
            # Harbor's rule: a task is shared as written, so it names the variable only
            bad(field, "a credential must be named as ${VAR} (the host's), not written")
        else:
            kept[str(key)] = value
    return kept


def _services(folder: Path) -> set[str]:
    """The side services of the task's compose file (none without one, or one that does
    not read: the compose loader says why)."""
    path = compose_file(folder)
    if path is None:
        return set()
    given = {**variables(folder, "agentenv/task"), "COMPOSE_PROJECT_NAME": LOAD_PROJECT}
    try:
        return {service.name for service in read_compose(path, given).side}
    except (ComposeError, OSError):
        return set()
