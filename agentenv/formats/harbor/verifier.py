"""Where a Harbor task's ``test.sh`` runs, from its task.toml: ``[verifier]
environment_mode``, ``[verifier.environment]``, the top-level ``artifacts`` and
``[[verifier.collect]]``, as the ``harbor`` check's ``mode``, ``image``, ``artifacts`` and
``collect`` (:class:`~agentenv.verify.kinds.harbor.HarborCheck`; the artifacts' collection
is :mod:`agentenv.runner.artifacts`).

Harbor runs ``test.sh`` in the agent's own container unless a task says ``separate``;
agentenv's default is ``final``, a new container of the agent's final filesystem with none
of its processes alive, and takes Harbor's shared mode only when a task names it
(``docs/harbor.md``)."""

from __future__ import annotations

import math
import re
from pathlib import Path, PurePosixPath
from typing import Any

from agentenv.formats.harbor import dockerfile as dockerfiles
from agentenv.formats.harbor.envvars import resolve
from agentenv.formats.harbor.refused import NOT_YET, Bad, hardware
from agentenv.problems import Problems
from agentenv.sandbox.spec import parse_size

_MIB = 1 << 20
# the keys of [verifier.environment] (a full Harbor [environment]) agentenv maps here (env
# is test.sh's and the network keys the verifier's baseline, both in fields.py; gpus, tpu,
# os refused as the task's); those Harbor does not use in a verifier's sandbox are refused,
# naming them
_NETWORK = ("network_mode", "allowed_hosts", "allow_internet")  # network.py reads them
_VERIFIER_ENVIRONMENT = (
    "docker_image",
    "cpus",
    "memory_mb",
    "storage_mb",
    "memory",
    "storage",
    "workdir",
    "build_timeout_sec",
    "env",
    "gpus",
    "gpu_types",
    "tpu",
    "os",
)
_UNUSED = ("healthcheck", "mcp_servers", "skills_dir")  # Harbor runs none of them there
_ARTIFACT = ("source", "destination", "exclude", "service")
MANIFEST = "manifest.json"  # the collection's record in the artifacts folder


def verifier_fields(raw: dict[str, Any], folder: Path, bad: Bad) -> dict[str, Any]:
    """The ``harbor`` check's ``mode``, ``image``, ``environment``, ``artifacts`` and
    ``collect`` (those given), each field agentenv does not run refused through ``bad``."""
    verifier = raw.get("verifier") if isinstance(raw.get("verifier"), dict) else {}
    assert isinstance(verifier, dict)
    mode = _mode(verifier, bad)
    fields: dict[str, Any] = {"mode": mode}
    environment = verifier.get("environment")
    if mode == "separate":
        own = environment if isinstance(environment, dict) else None
        fields.update(_separate(own, folder, bad))
    artifacts = raw.get("artifacts") or []
    if isinstance(artifacts, list):
        fields["artifacts"] = [_artifact(a, i, bad) for i, a in enumerate(artifacts)]
    else:
        bad("artifacts", f"{artifacts!r} is not a list")
    collect = verifier.get("collect") or []
    if isinstance(collect, list):
        fields["collect"] = [_collect(c, i, bad) for i, c in enumerate(collect)]
    else:
        bad("verifier.collect", f"{collect!r} is not a list of tables")
    return fields


def _separate(environment: dict[str, Any] | None, folder: Path, bad: Bad) -> dict[str, Any]:
    """A separate verifier's image and sandbox, as Harbor resolves them: ``[verifier.
    environment] docker_image``, else an image built from ``tests/Dockerfile`` (context
    tests/), both holding their tests (not uploaded), else the task's own image; the
    resources and workdir of ``[verifier.environment]`` (the task's where unset)."""
    return separate_fields(environment, folder / "tests", "tests/Dockerfile", "verifier", bad)


def separate_fields(
    environment: dict[str, Any] | None, tests: Path, dockerfile: str, where: str, bad: Bad
) -> dict[str, Any]:
    """The ``image`` and ``environment`` of a separate verifier whose
    ``[verifier.environment]`` table is ``environment`` (at ``where``.environment) and
    whose tests are the folder ``tests`` (its ``Dockerfile`` named ``dockerfile`` in the
    check): its image, else one built from ``tests/Dockerfile``; its resources."""
    fields: dict[str, Any] = {}
    own: dict[str, Any] = {}
    table = environment or {}
    for key in table:
        if key in _UNUSED:
            bad(f"{where}.environment.{key}", "Harbor does not use it in a verifier's sandbox")
        elif key not in (*_VERIFIER_ENVIRONMENT, *_NETWORK):
            bad(f"{where}.environment.{key}", f"a separate verifier's {key} {NOT_YET}")
    hardware(table, lambda field, why: bad(f"{where}.{field}", why))
    if table.get("docker_image") is not None:
        fields["image"] = str(table["docker_image"])
        own["bundled"] = True
    elif (tests / "Dockerfile").is_file():
        own |= {"dockerfile": dockerfile, "bundled": True}
        text = (tests / "Dockerfile").read_text(errors="replace")
        try:  # without a WORKDIR of its own it keeps its base's (the task's image, often)
            if re.search(r"^\s*WORKDIR\s", text, re.IGNORECASE | re.MULTILINE):
                own["workdir"] = dockerfiles.workdir(tests / "Dockerfile")
        except Problems as e:
            bad(where, f"{dockerfile}: {e.problems[0].message}")
    elif (tests / "docker-compose.yaml").is_file():
        bad(where, f"a verifier environment of {tests.name}/docker-compose.yaml {NOT_YET}")
    own |= _resources(table, where, bad)
    fields["environment"] = own
    return fields


def _resources(table: dict[str, Any], where: str, bad: Bad) -> dict[str, Any]:
    """cpus, memory, disk, workdir and build_timeout_s of ``[verifier.environment]``."""
    out: dict[str, Any] = {}
    for key, field in (("cpus", "cpus"), ("build_timeout_sec", "build_timeout_s")):
        if key in table:
            number = _positive(table[key])
            if number is None:
                bad(f"{where}.environment.{key}", f"{table[key]!r} is not a number above 0")
            else:
                out[field] = number
    for key, field in (("memory", "memory"), ("storage", "disk")):
        size: int | None = None
        if f"{key}_mb" in table:
            mib = _positive(table[f"{key}_mb"])
            size = None if mib is None else int(mib * _MIB)
            key = f"{key}_mb"
        elif key in table:
            try:
                size = parse_size(str(table[key]))
            except ValueError:
                size = None
        else:
            continue
        if size is None or size <= 0:
            bad(f"{where}.environment.{key}", f"{table[key]!r} is not a size above 0")
        else:
            out[field] = size
    workdir = table.get("workdir")
    if workdir is not None:
        if isinstance(workdir, str) and workdir.startswith("/"):
            out["workdir"] = workdir
        else:
            bad(f"{where}.environment.workdir", f"{workdir!r} is not an absolute path")
    return out


def _positive(value: Any) -> float | None:
    """``value`` as a number above 0 (a number in a string too, as Harbor reads it)."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def task_mode(raw: dict[str, Any]) -> str:
    """The task's check ``mode`` as :func:`verifier_fields` makes it (a bad value: final)."""
    verifier = raw.get("verifier") if isinstance(raw.get("verifier"), dict) else {}
    assert isinstance(verifier, dict)
    return _mode(verifier, lambda field, why: None)


def step_verifier(
    verifier: dict[str, Any], step_dir: Path, mode: str, where: str, bad: Bad
) -> dict[str, Any] | None:
    """A step's own separate verifier (Harbor's ``[steps.verifier] environment_mode`` and
    ``[steps.verifier.environment]``, and ``steps/<name>/tests/Dockerfile``) over the task's
    ``mode``: the check's ``mode``, ``image`` and ``environment`` for the step, with
    ``own`` (its resources replace the task's) and ``env`` (its environment's env); None
    when the step verifies as the task does. A step graded elsewhere than the task's kind
    of place (its agent's sandbox or not) is refused, not yet."""
    given, table = verifier.get("environment_mode"), verifier.get("environment")
    field = f"{where}.verifier"
    if given not in (None, "shared", "separate"):
        bad(f"{field}.environment_mode", f"{given!r} is not 'shared' or 'separate'")
        return None
    if table is not None and not isinstance(table, dict):
        bad(f"{field}.environment", "must be a table")
        return None
    step_mode = given or ("separate" if table is not None else None)
    if step_mode is not None and (step_mode == "shared") != (mode == "shared"):
        why = f"{step_mode!r} where the task's verifier is {mode!r}: "
        bad(f"{field}.environment_mode", why + f"a step's own kind of verifier {NOT_YET}")
        return None
    tests = step_dir / "tests"
    dockerfile = (tests / "Dockerfile").is_file()
    if mode != "separate" and step_mode != "separate":
        return None  # final or shared, as the task's (a tests/Dockerfile is a file then)
    if step_mode is None and not dockerfile and mode == "separate":
        return None  # the task's separate verifier
    out = separate_fields(table, tests, str(tests / "Dockerfile"), field, bad)
    env = resolve(table.get("env") if table else None, f"{field}.environment.env", bad)
    return {**out, "mode": "separate", "own": table is not None, "env": env}


def _mode(verifier: dict[str, Any], bad: Bad) -> str:
    """Harbor's ``environment_mode`` when written (``separate`` also implied by a
    ``[verifier.environment]``), else agentenv's ``final``."""
    mode = verifier.get("environment_mode")
    if mode is None:
        return "separate" if isinstance(verifier.get("environment"), dict) else "final"
    if mode not in ("shared", "separate"):
        bad("verifier.environment_mode", f"{mode!r} is not 'shared' or 'separate'")
        return "final"
    if mode == "shared" and "environment" in verifier:
        bad("verifier.environment", "is not allowed with environment_mode = 'shared' (Harbor)")
    return str(mode)


def _artifact(entry: Any, index: int, bad: Bad) -> dict[str, Any]:
    """One artifact: a path (Harbor's short form) or a table (``source``, ``destination``,
    ``exclude``, ``service``); a destination that could leave the episode's artifacts
    folder, or a source with ``..``, refused naming the field."""
    field = f"artifacts[{index}]"
    if isinstance(entry, str):
        entry = {"source": entry}
    if not isinstance(entry, dict):
        bad(field, f"{entry!r} is not a path or a table")
        return {"source": "/"}
    for key in entry:
        if key not in _ARTIFACT:
            bad(f"{field}.{key}", f"is not a field of an artifact (one of {', '.join(_ARTIFACT)})")
    source = entry.get("source")
    if not isinstance(source, str) or not source.startswith("/"):
        bad(f"{field}.source", f"{source!r} is not an absolute path in the sandbox")
        source = "/"
    elif ".." in PurePosixPath(source).parts:
        bad(f"{field}.source", f"{source!r} must not contain '..'")
    out: dict[str, Any] = {"source": source}
    destination = entry.get("destination")
    if destination not in (None, ""):
        why = _bad_destination(destination)
        if why:
            bad(f"{field}.destination", f"{destination!r} {why}")
        else:
            out["destination"] = destination
    exclude = entry.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude):
        bad(f"{field}.exclude", f"{exclude!r} is not a list of patterns")
    else:
        out["exclude"] = exclude
    if entry.get("service") not in (None, "main"):
        out["service"] = str(entry["service"])
    return out


def _bad_destination(destination: Any) -> str:
    """Why ``destination`` cannot be a path under the artifacts folder ('' if it can)."""
    if not isinstance(destination, str):
        return "is not a path"
    if "\\" in destination:
        return "must use '/' between its parts"
    path = PurePosixPath(destination)
    if path.is_absolute():
        return "must be relative to the episode's artifacts folder"
    if ".." in path.parts:
        return "must not contain '..' (it would leave the episode's artifacts folder)"
    if not path.parts or destination.rstrip("/") == MANIFEST:
        return f"must name a file or folder other than {MANIFEST}"
    return ""


def _collect(entry: Any, index: int, bad: Bad) -> dict[str, Any]:
    """One ``[[verifier.collect]]`` table as a :class:`HarborCollect`'s fields."""
    field = f"verifier.collect[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        bad(field, "is not a table with a command")
        return {"command": "true"}
    out: dict[str, Any] = {"command": entry["command"]}
    if entry.get("service") is not None:
        out["service"] = str(entry["service"])
    if entry.get("timeout_sec") is not None:
        out["timeout_s"] = entry["timeout_sec"]
    if entry.get("user") is not None:
        out["user"] = str(entry["user"])
    return out
