"""Where a Harbor task's ``test.sh`` runs, from its task.toml: ``[verifier]
environment_mode``, ``[verifier.environment]`` and the top-level ``artifacts``, as the
``harbor`` check's ``mode``, ``image`` and ``artifacts``
(:class:`~agentenv.verify.kinds.harbor.HarborCheck`).

Harbor runs ``test.sh`` in the agent's own container unless a task says ``separate``;
agentenv's default is ``final``, a new container of the agent's final filesystem with none
of its processes alive, and takes Harbor's shared mode only when a task names it
(``docs/harbor.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentenv.formats.harbor.refused import NOT_YET, Bad

# what agentenv takes from [verifier.environment]: its image; the rest of that table
# (resources, env, a build) is the verifier container's, which is made like the agent's
_VERIFIER_ENVIRONMENT = ("docker_image",)
_ARTIFACT = ("source",)


def verifier_fields(raw: dict[str, Any], folder: Path, bad: Bad) -> dict[str, Any]:
    """The ``harbor`` check's ``mode``, ``image`` and ``artifacts`` (those given), each
    field agentenv does not run refused through ``bad``."""
    verifier = raw.get("verifier") if isinstance(raw.get("verifier"), dict) else {}
    assert isinstance(verifier, dict)
    mode = _mode(verifier, bad)
    fields: dict[str, Any] = {"mode": mode}
    environment = verifier.get("environment")
    if isinstance(environment, dict):
        for key in environment:
            if key not in _VERIFIER_ENVIRONMENT:
                bad(f"verifier.environment.{key}", f"a separate verifier's {key} {NOT_YET}")
        if environment.get("docker_image") is not None:
            fields["image"] = str(environment["docker_image"])
    if (folder / "tests" / "Dockerfile").is_file():
        bad("verifier", f"a verifier image built from tests/Dockerfile {NOT_YET}")
    artifacts = raw.get("artifacts") or []
    if artifacts and mode != "separate":
        why = "collecting artifacts into the job folder"
        bad("artifacts", f"{why} {NOT_YET} (a separate verifier gets them)")
    elif isinstance(artifacts, list):
        fields["artifacts"] = [_artifact(a, i, bad) for i, a in enumerate(artifacts)]
    return fields


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
    """One artifact: a path (Harbor's short form) or a table of which ``source`` is run."""
    if isinstance(entry, str):
        return {"source": entry}
    if not isinstance(entry, dict):
        bad(f"artifacts[{index}]", f"{entry!r} is not a path or a table")
        return {"source": "/"}
    for key in entry:
        if key not in _ARTIFACT:
            bad(f"artifacts[{index}].{key}", f"an artifact's {key} {NOT_YET}")
    return {"source": entry.get("source")}
