"""A task's ``docker-compose.yaml`` as a plain model: :func:`parse` reads the YAML,
substitutes its ``${VAR}`` templates from the variables it is given (never the host's
environment), and keeps only what :mod:`agentenv.sandbox.compose` runs. Every key it does
not honour is refused naming it (``services.db.ports``), never dropped: a service that would
be started differently from what its file says is a task graded on another environment."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

MAIN = "main"
"""The service the agent works in, as Harbor names it; built from ``environment/``."""

KEEPALIVE_COMMANDS = (
    ["sleep", "infinity"],
    ["sh", "-c", "sleep infinity"],
    ["/bin/sh", "-c", "sleep infinity"],
    ["tail", "-f", "/dev/null"],
)
"""What a task may give ``main`` as its command: Harbor's keep-alive, which agentenv's own
keep-alive stands for."""

Bad = Callable[[str, str], None]
"""Records a problem: (field, message)."""
CONDITIONS = ("service_started", "service_healthy", "service_completed_successfully")
Condition = Literal["service_started", "service_healthy", "service_completed_successfully"]


class ComposeError(ValueError):
    """What a compose file holds that agentenv does not run: ``(field, message)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


class Healthcheck(BaseModel):
    """``healthcheck:``; durations in seconds. ``test`` is the engine's form
    (``["CMD", ...]``, ``["CMD-SHELL", "..."]``)."""

    model_config = ConfigDict(frozen=True)

    test: list[str]
    interval_s: float = 30.0
    timeout_s: float = 30.0
    retries: int = 3
    start_period_s: float = 0.0
    start_interval_s: float = 5.0


class Mount(BaseModel):
    """One entry of a service's ``volumes:``: a named volume of the group, or a bind of a
    path inside the task's ``environment/`` folder (``source`` then absolute on the host)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["volume", "bind"]
    source: str
    target: str
    read_only: bool = False


class Build(BaseModel):
    """``build:``: a context folder inside ``environment/`` and its Dockerfile."""

    model_config = ConfigDict(frozen=True)

    context: Path
    dockerfile: str = "Dockerfile"
    target: str | None = None
    args: dict[str, str] = {}


class Service(BaseModel):
    """One service, as agentenv starts it."""

    model_config = ConfigDict(frozen=True)

    name: str
    image: str | None = None
    build: Build | None = None
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    environment: dict[str, str] = {}
    depends_on: dict[str, Condition] = {}
    healthcheck: Healthcheck | None = None
    volumes: list[Mount] = []
    working_dir: str | None = None
    user: str | None = None
    aliases: list[str] = []
    expose: list[str] = []
    memory: int | None = None
    cpus: float | None = None
    init: bool = False
    restart: Literal["no", "always", "on-failure", "unless-stopped"] = "no"


class Compose(BaseModel):
    """The services of a compose file (``main`` included when the file names it) and the
    named volumes they share."""

    model_config = ConfigDict(frozen=True)

    services: dict[str, Service]
    volumes: list[str] = []

    @property
    def main(self) -> Service:
        """What the file says of ``main`` (nothing: Harbor's default main)."""
        return self.services.get(MAIN) or Service(name=MAIN)

    @property
    def side(self) -> list[Service]:
        """The services beside ``main``, in an order that starts each after its
        dependencies."""
        order: list[str] = []

        def visit(name: str) -> None:
            if name in order or name == MAIN:
                return
            for dep in sorted(self.services[name].depends_on):
                visit(dep)
            order.append(name)

        for name in sorted(self.services):
            visit(name)
        return [self.services[name] for name in order]


# keys read here; every other key of a service (ports, privileged, network_mode, cap_add,
# ...) is refused by name. `networks` maps onto the group's one private network.
_SERVICE_KEYS = frozenset(
    {"image", "build", "command", "entrypoint", "environment", "depends_on", "healthcheck",
     "volumes", "working_dir", "user", "networks", "expose", "mem_limit", "cpus", "init",
     "restart", "pull_policy"}
)  # fmt: skip
# what the task may say of main: the rest is Harbor's (built from environment/, its keep-alive);
# of its volumes, only the group's named ones (see _mount)
_MAIN_KEYS = frozenset({"environment", "depends_on", "networks", "command", "expose", "volumes"})
_MAIN_BIND = (
    "a bind of a host path into main is not supported: the agent is root in main, and a "
    "writable bind would let it write the task's folder on the host (even read-only, main's "
    "sandbox never carries host paths); use a named volume of the file's `volumes:`"
)
_TOP_KEYS = frozenset({"services", "volumes", "networks", "version", "name"})
_VARIABLE = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_]\w*))")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)b?\s*$", re.IGNORECASE)


def parse(text: str, folder: Path, variables: Mapping[str, str]) -> Compose:
    """The compose file ``text`` whose relative paths are inside ``folder`` (the task's
    ``environment/``), its templates filled from ``variables``. Raises
    :class:`ComposeError` listing every key it does not run, and every template it cannot
    fill."""
    problems: list[tuple[str, str]] = []

    def bad(field: str, message: str) -> None:
        problems.append((field, message))

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ComposeError([("", f"not YAML: {e}")]) from e
    if not isinstance(raw, dict):
        raise ComposeError([("", "must be a mapping with `services:`")])
    raw = _fill(raw, "", variables, bad)
    for key in raw:
        if key not in _TOP_KEYS and not str(key).startswith("x-"):
            bad(str(key), "is not supported by agentenv's compose runner")
    volumes = _top_volumes(raw.get("volumes"), bad)
    _top_networks(raw.get("networks"), bad)
    services_raw = raw.get("services")
    if not isinstance(services_raw, dict) or not services_raw:
        bad("services", "must name at least one service")
        raise ComposeError(problems)
    services = {}
    for name, body in services_raw.items():
        service = _service(str(name), body, folder, volumes, bad)
        if service is not None:
            services[str(name)] = service
    _check_dependencies(services, bad)
    if problems:
        raise ComposeError(problems)
    return Compose(services=services, volumes=volumes)


def _fill(value: Any, field: str, variables: Mapping[str, str], bad: Bad) -> Any:
    """``value`` with compose's ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``
    and ``$$`` substituted in every string (keys too)."""
    if isinstance(value, dict):
        return {_fill(k, field, variables, bad): _fill(v, f"{field}.{k}".strip("."), variables, bad)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_fill(v, field, variables, bad) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        op, default = match.group(2), match.group(3) or ""
        given = variables.get(name)
        if given is not None and not (op in (":-", ":?") and given == ""):
            return given
        if op in (":-", "-"):
            return default
        bad(field, f"${{{name}}} is not set: agentenv gives a task's compose file only "
            f"Harbor's own variables ({', '.join(sorted(variables))}), never the host's "
            f"environment; give a default (${{{name}:-value}})")  # fmt: skip
        return ""

    return _VARIABLE.sub(one, value)


def _top_volumes(raw: Any, bad: Bad) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        bad("volumes", "must be a mapping of volume names")
        return []
    for name, body in raw.items():
        for key in body or {}:
            bad(f"volumes.{name}.{key}", "is not supported: the group's volumes are its own")
    return [str(name) for name in raw]


def _top_networks(raw: Any, bad: Bad) -> None:
    """Every service is on the group's one private network: a network of the file may only
    be a plain bridge (``internal`` changes nothing: the group's network is already)."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        bad("networks", "must be a mapping of network names")
        return
    for name, body in raw.items():
        for key, value in (body or {}).items():
            if (key, value) not in (("driver", "bridge"), ("internal", True)):
                why = "is not supported: the services share one private network of their own"
                bad(f"networks.{name}.{key}", why)


def _service(name: str, body: Any, folder: Path, volumes: list[str], bad: Bad) -> Service | None:
    where = f"services.{name}"
    if body is None:
        body = {}
    if not isinstance(body, dict):
        bad(where, "must be a mapping")
        return None
    allowed = _MAIN_KEYS if name == MAIN else _SERVICE_KEYS
    for key in body:
        if key not in allowed:
            why = "is not supported by agentenv's compose runner"
            if name == MAIN and key in _SERVICE_KEYS:
                why = "is Harbor's to set for main (built from environment/, its keep-alive)"
            bad(f"{where}.{key}", why)
    fields: dict[str, Any] = {"name": name, **_running(name, body, folder, where, bad)}
    fields["environment"] = _environment(body.get("environment"), f"{where}.environment", bad)
    fields["depends_on"] = _depends_on(body.get("depends_on"), f"{where}.depends_on", bad)
    if "healthcheck" in body:
        fields["healthcheck"] = _healthcheck(body["healthcheck"], f"{where}.healthcheck", bad)
    fields["volumes"] = [
        m for i, v in enumerate(body.get("volumes") or [])
        if (m := _mount(v, folder, volumes, f"{where}.volumes[{i}]", bad, main=name == MAIN))
        is not None
    ]  # fmt: skip
    fields["aliases"] = _aliases(body.get("networks"), f"{where}.networks", bad)
    fields["expose"] = [str(p) for p in body.get("expose") or []]
    try:
        return Service(**fields)
    except ValueError as e:
        bad(where, str(e).splitlines()[-1] if str(e) else "is not valid")
        return None


def _running(name: str, body: dict[str, Any], folder: Path, where: str, bad: Bad) -> dict[str, Any]:
    """What a service runs, as whom and with what: image or build, command, entrypoint,
    working_dir, user, resources, init, restart."""
    fields: dict[str, Any] = {}
    if "image" in body:
        fields["image"] = str(body["image"])
    if "build" in body:
        fields["build"] = _build(body["build"], folder, f"{where}.build", bad)
    if name != MAIN and "image" not in body and "build" not in body:
        bad(where, "has neither image nor build")
    for key in ("command", "entrypoint"):
        if key in body:
            fields[key] = _argv(body[key], f"{where}.{key}", bad)
    if name == MAIN and fields.get("command") not in (None, *KEEPALIVE_COMMANDS):
        bad(f"{where}.command", "main runs Harbor's keep-alive; another command is not supported")
    for key in ("working_dir", "user"):
        if body.get(key) is not None:
            fields[key] = str(body[key])
    if "mem_limit" in body:
        fields["memory"] = _size(body["mem_limit"], f"{where}.mem_limit", bad)
    if "cpus" in body:
        try:
            fields["cpus"] = float(body["cpus"])
        except (TypeError, ValueError):
            bad(f"{where}.cpus", f"{body['cpus']!r} is not a number")
    if "init" in body:
        fields["init"] = bool(body["init"])
    if "restart" in body:
        fields["restart"] = str(body["restart"])
    if body.get("pull_policy", "missing") not in ("missing", "if_not_present", "never", "build"):
        bad(f"{where}.pull_policy", "only images present here (or built) run: no pulls")
    return fields


def _build(raw: Any, folder: Path, where: str, bad: Bad) -> Build | None:
    body = {"context": raw} if isinstance(raw, str) else raw
    if not isinstance(body, dict):
        bad(where, "must be a path or a mapping")
        return None
    for key in body:
        if key not in ("context", "dockerfile", "target", "args"):
            bad(f"{where}.{key}", "is not supported by agentenv's compose runner")
    context = _inside(folder, str(body.get("context", ".")), f"{where}.context", bad)
    args = body.get("args") or {}
    if isinstance(args, list):
        args = dict(str(a).partition("=")[::2] for a in args)
    return Build(
        context=context or folder,
        dockerfile=str(body.get("dockerfile", "Dockerfile")),
        target=None if body.get("target") is None else str(body["target"]),
        args={str(k): str(v) for k, v in args.items()},
    )


def _inside(folder: Path, path: str, where: str, bad: Bad) -> Path | None:
    """``path`` (relative to ``folder``) as an absolute host path, if it stays inside the
    task's folder: a compose file must not mount or build from the host's own files."""
    resolved = (folder / path).resolve()
    root = folder.resolve()
    if resolved != root and root not in resolved.parents:
        bad(where, f"{path!r} is outside the task's environment/ folder: not allowed")
        return None
    return resolved


def _argv(raw: Any, where: str, bad: Bad) -> list[str] | None:
    if isinstance(raw, str):
        return ["/bin/sh", "-c", raw]
    if isinstance(raw, list) and all(isinstance(a, str | int | float) for a in raw):
        return [str(a) for a in raw]
    bad(where, "must be a string or a list of strings")
    return None


def _environment(raw: Any, where: str, bad: Bad) -> dict[str, str]:
    if raw is None:
        return {}
    if isinstance(raw, list):
        pairs = [str(item).partition("=") for item in raw]
        if any(not sep for _, sep, _ in pairs):
            bad(where, "an entry without '=' would take the host's value: give one")
        return {k: v for k, sep, v in pairs if sep}
    if isinstance(raw, dict):
        return {str(k): "" if v is None else _scalar(v) for k, v in raw.items()}
    bad(where, "must be a mapping or a list of NAME=value")
    return {}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _depends_on(raw: Any, where: str, bad: Bad) -> dict[str, Condition]:
    if raw is None:
        return {}
    if isinstance(raw, list):
        return {str(name): "service_started" for name in raw}
    if not isinstance(raw, dict):
        bad(where, "must be a list or a mapping")
        return {}
    found: dict[str, Condition] = {}
    for name, body in raw.items():
        body = body or {}
        condition = body.get("condition", "service_started")
        for key in body:
            if key not in ("condition", "required", "restart"):
                bad(f"{where}.{name}.{key}", "is not supported by agentenv's compose runner")
        if body.get("required", True) is not True:
            bad(f"{where}.{name}.required", "an optional dependency is not supported")
        if condition not in (
            "service_started",
            "service_healthy",
            "service_completed_successfully",
        ):
            bad(f"{where}.{name}.condition", f"{condition!r} is not a compose condition")
            continue
        found[str(name)] = condition
    return found


def _healthcheck(raw: Any, where: str, bad: Bad) -> Healthcheck | None:
    if not isinstance(raw, dict):
        bad(where, "must be a mapping")
        return None
    known = ("test", "interval", "timeout", "retries", "start_period", "start_interval", "disable")
    for key in raw:
        if key not in known:
            bad(f"{where}.{key}", "is not supported by agentenv's compose runner")
    test = raw.get("test")
    if raw.get("disable") is True or test in (["NONE"], "NONE"):
        return None
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test or test[0] not in ("CMD", "CMD-SHELL"):
        bad(f"{where}.test", "must be a command string, or a list starting CMD or CMD-SHELL")
        return None
    durations = {}
    for key in ("interval", "timeout", "start_period", "start_interval"):
        if key in raw:
            seconds = _duration(raw[key])
            if seconds is None:
                bad(f"{where}.{key}", f"{raw[key]!r} is not a duration like '5s' or '1m30s'")
            else:
                durations[f"{key}_s"] = seconds
    return Healthcheck(test=[str(t) for t in test], retries=int(raw.get("retries", 3)), **durations)


def _duration(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _size(value: Any, where: str, bad: Bad) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value))
    if not match:
        bad(where, f"{value!r} is not a size like '512m'")
        return None
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


def _mount(
    raw: Any, folder: Path, volumes: list[str], where: str, bad: Bad, *, main: bool = False
) -> Mount | None:
    if isinstance(raw, str):
        parts = raw.split(":")
        if len(parts) == 1 or len(parts) > 3 or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            bad(where, f"{raw!r}: give source:target[:ro] (an anonymous volume is not supported)")
            return None
        source, target, read_only = parts[0], parts[1], len(parts) == 3 and parts[2] == "ro"
        kind = "bind" if source.startswith((".", "/", "~")) else "volume"
    elif isinstance(raw, dict):
        for key in raw:
            if key not in ("type", "source", "target", "read_only"):
                bad(f"{where}.{key}", "is not supported by agentenv's compose runner")
        kind, source = str(raw.get("type", "volume")), str(raw.get("source", ""))
        target, read_only = str(raw.get("target", "")), bool(raw.get("read_only", False))
    else:
        bad(where, "must be a string or a mapping")
        return None
    if not PurePosixPath(target).is_absolute():
        bad(where, f"the target {target!r} must be an absolute path")
        return None
    if kind == "volume":
        if source not in volumes:
            bad(where, f"the volume {source!r} is not declared under the file's `volumes:`")
            return None
        return Mount(kind="volume", source=source, target=target, read_only=read_only)
    if kind != "bind":
        bad(where, f"a {kind} mount is not supported (a named volume or a path of the task)")
        return None
    if main:
        bad(where, _MAIN_BIND)
        return None
    # a host path (the docker socket, /etc, ~) would hand a service the host: only the
    # task's own files may be bound
    path = _inside(folder, source, where, bad)
    if path is None:
        return None
    return Mount(kind="bind", source=str(path), target=target, read_only=read_only)


def _aliases(raw: Any, where: str, bad: Bad) -> list[str]:
    """A service's ``networks:``: every network is the group's one; its ``aliases`` are
    more names it is reached by."""
    if raw is None or isinstance(raw, list):
        return []
    if not isinstance(raw, dict):
        bad(where, "must be a list or a mapping")
        return []
    aliases: list[str] = []
    for name, body in raw.items():
        for key, value in (body or {}).items():
            if key != "aliases":
                bad(f"{where}.{name}.{key}", "is not supported by agentenv's compose runner")
            else:
                aliases += [str(a) for a in value or []]
    return aliases


def _check_dependencies(services: dict[str, Service], bad: Bad) -> None:
    """Every dependency is a service of the file, none on itself or in a cycle, and one
    waited on healthy has a healthcheck (else it would never be)."""
    for name, service in services.items():
        for dep, condition in service.depends_on.items():
            where = f"services.{name}.depends_on.{dep}"
            if dep not in services or dep == MAIN:
                bad(where, f"{dep!r} is not a service beside main in this file")
            elif condition == "service_healthy" and services[dep].healthcheck is None:
                bad(where, f"waits for {dep!r} to be healthy, but {dep!r} has no healthcheck")
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2 or name not in services:
            return
        if state.get(name) == 1:
            bad(f"services.{name}.depends_on", f"a cycle: {' -> '.join([*path, name])}")
            return
        state[name] = 1
        for dep in services[name].depends_on:
            visit(dep, [*path, name])
        state[name] = 2

    for name in services:
        visit(name, [])


def read_compose(path: Path, variables: Mapping[str, str]) -> Compose:
    """The compose file at ``path`` (relative paths in it from its folder), its templates
    filled from ``variables``; :class:`ComposeError` for what agentenv does not run."""
    return parse(path.read_text(), path.parent, variables)
