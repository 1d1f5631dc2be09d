"""Where a Harbor task's ``test.sh`` runs, and the verdict made of it (the ``harbor`` check's
``mode``, :mod:`agentenv.verify.kinds.harbor`):

- ``final`` (agentenv's default): a new sandbox made from the snapshot of the agent's final
  filesystem: none of the agent's processes alive, ``/tests`` and ``/logs/verifier`` laid
  down fresh, the tests uploaded only then, the reward read from what that run wrote;
- ``separate`` (Harbor's ``environment_mode = "separate"``): a fresh sandbox of the task's
  image (or the verifier's own), the declared artifacts and ``/logs/artifacts`` copied in
  from the agent's final filesystem at their paths, then the same;
- ``shared`` (opt-in, Harbor's default): graded in the agent's own sandbox by
  :func:`~agentenv.runner.episode.finish`; the agent, root there, can decide its reward.

A compose task (``environment/docker-compose.yaml``) is graded the same ways: in ``final``
its new ``main`` joins the side services the agent's snapshot kept, as the agent left them
(their state is the outcome), on their network under the alias ``main``
(:func:`~agentenv.sandbox.compose.sandbox.services_kept`); the clean prepared state is
graded in a new group of fresh services; ``separate`` is a lone sandbox, as Harbor's.

A sandbox made from the agent's filesystem still runs the programs it left: the system
files it changed (the engine's diff, :mod:`agentenv.runner.system_changes`) are listed on
the score (``Score.suspicious``), and a task may make them a 0 (``on_system_change``).
A verifier error on the agent's state is the agent's 0 when the clean prepared state
verifies (what doing nothing earns); only one the clean state also gets stays an error."""

from __future__ import annotations

import json
import tarfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import anyio

from agentenv import scratch
from agentenv.archive import Archive
from agentenv.formats.harbor.compose import start_compose
from agentenv.log import get_logger
from agentenv.runner.artifacts import MANIFEST
from agentenv.runner.system_changes import findings
from agentenv.sandbox import SandboxSpec, create
from agentenv.sandbox.errors import EngineUnavailable, SandboxUnavailable
from agentenv.sandbox.images import BASE_IMAGE, dockerfile_image
from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.base import CHECKER_CAPS
from agentenv.verify.kinds.harbor import (
    LOGS,
    NAME,
    TESTS,
    HarborCheck,
    HarborVerifierEnvironment,
    verify_in_sandbox,
)
from agentenv.verify.score import CheckResult, Score

if TYPE_CHECKING:
    from agentenv.runner.episode import Final, Prepared
    from agentenv.sandbox.compose.sandbox import KeptServices

log = get_logger(__name__)


def runs_apart(check: object) -> bool:
    """Whether ``check`` is a Harbor check verified in a sandbox of its own (``final`` or
    ``separate``), from the agent's snapshot: such a task is ``verify_in = "final"``."""
    return isinstance(check, HarborCheck) and check.mode != "shared"


def verifier_spec(prepared: Prepared, image: str) -> SandboxSpec:
    """A Harbor verifier's sandbox: as the agent's (root, writable, the task's network,
    CPUs and memory; the image's ENTRYPOINT run as in Harbor, so a service it starts is up
    for test.sh), from ``image``."""
    task, check = prepared.task, prepared.task.verifier
    # the verifier's own network where the task gives it one (Harbor's [verifier] network_mode)
    own = check if isinstance(check, HarborCheck) and check.network is not None else None
    return SandboxSpec(
        backend=prepared.backend,
        image=image,
        dockerfile=prepared.dockerfile if image == prepared.image else None,
        build_timeout_s=task.build_timeout_s,
        workdir=task.workdir,
        user="0:0",  # agentenv's commands: root that may drop to test.sh's user
        cap_add=CHECKER_CAPS,
        read_only=False,
        disk=task.disk,
        network=own.network if own and own.network else task.network,
        allowed_hosts=own.allowed_hosts if own else task.allowed_hosts,
        cpus=task.cpus,
        memory=task.memory,
        image_entrypoint=task.image_entrypoint,
    )


def separate_spec(prepared: Prepared, check: HarborCheck) -> SandboxSpec:
    """A ``separate`` verifier's sandbox, as Harbor resolves it: ``[verifier.environment]
    docker_image``, else the image built from ``tests/Dockerfile`` (context tests/), else
    the task's; its cpus, memory, disk, workdir and build timeout where given."""
    task, own = prepared.task, check.environment
    spec = verifier_spec(prepared, check.image or prepared.image)
    update: dict[str, object] = {
        k: v
        for k, v in {
            "cpus": own.cpus,
            "memory": own.memory,
            "disk": own.disk,
            "workdir": own.workdir,
            "build_timeout_s": own.build_timeout_s,
        }.items()
        if v is not None
    }
    if own.dockerfile is not None and check.image is None:
        assert task.folder is not None  # a Harbor task is loaded from its folder
        dockerfile = task.folder / own.dockerfile
        image = dockerfile_image(BASE_IMAGE, dockerfile, f"{task.id}-verifier")
        update |= {"image": image, "dockerfile": dockerfile}
    return spec.model_copy(update=update)


_IMAGE = ("dockerfile", "bundled")  # where a verifier's image comes from


def step_check(check: HarborCheck, own: dict[str, object], env: dict[str, str]) -> HarborCheck:
    """``check`` for a step with a separate verifier of its own (``TaskStep.
    verifier_environment``), as Harbor resolves it: the step's image, else its
    ``tests/Dockerfile``'s, else the task's verifier's; the step's resources when it has a
    ``[steps.verifier.environment]`` (else the task's); its environment's env under the
    step's ``[steps.verifier] env``, over the task's."""
    given = own["environment"]
    assert isinstance(given, dict)
    task_env = check.environment.model_dump(exclude_none=True, exclude_defaults=True)
    falls = own.get("image") is None and "dockerfile" not in given  # to the task's image
    base = {k: v for k, v in task_env.items() if k in _IMAGE} if falls else {}
    if not own.get("own"):
        base |= {k: v for k, v in task_env.items() if k not in _IMAGE}
    step_env = own.get("env") or {}
    assert isinstance(step_env, dict)
    return check.model_copy(
        update={
            "mode": "separate",
            "image": own.get("image") or (check.image if falls else None),
            "environment": HarborVerifierEnvironment.model_validate({**base, **given}),
            "env": {**check.env, **step_env, **env},
        }
    )


async def harbor_verdict(prepared: Prepared, final: Final) -> Score:
    """The Harbor task's score for the agent's final state, by its check's ``mode``, with
    the system files the agent changed listed (and scored 0 when the task says so)."""
    check = prepared.task.verifier
    assert isinstance(check, HarborCheck)
    if check.mode == "shared":
        score = final.score or _lost("the agent's sandbox was not graded")
        if score.error is not None:  # the agent's doing if the clean state grades
            score = await _blame_or_error(prepared, check, score, score.error)
    else:
        assert final.snapshot is not None, "a Harbor task verified apart is verify_in=final"
        async with _kept(prepared, final.snapshot.ref) as beside:
            score = await _graded_apart(prepared, check, final, beside)
    return flag_changes(score, check, final.system_changes)


@asynccontextmanager
async def _kept(prepared: Prepared, snapshot: str) -> AsyncIterator[KeptServices | None]:
    """The side services a compose task's snapshot kept (``None`` for any other task)."""
    if prepared.task.compose is None:
        yield None
        return
    from agentenv.sandbox.compose.sandbox import services_kept  # the Docker SDK: when run

    async with services_kept(snapshot) as kept:
        yield kept


async def _graded_apart(
    prepared: Prepared, check: HarborCheck, final: Final, beside: KeptServices | None = None
) -> Score:
    """Grade the agent's final state (its snapshot, beside the services it kept, if any;
    or, ``separate``, the artifacts collected from it), once more in a new sandbox if the
    first is lost; an error there is the agent's 0 if the clean prepared state grades."""
    assert final.snapshot is not None
    started = time.monotonic()
    why = ""
    for _ in range(2):
        try:
            score = await grade_from(
                prepared, check, final.snapshot.ref, beside, artifacts=final.artifacts
            )
        except EngineUnavailable:
            raise
        except SandboxUnavailable as e:
            why = str(e)
            continue
        if score.error is None:
            return score
        why = score.error
        break
    else:
        score = None
    return await _blame_or_error(prepared, check, score, why, started)


async def _blame_or_error(
    prepared: Prepared,
    check: HarborCheck,
    score: Score | None,
    why: str,
    started: float | None = None,
) -> Score:
    """``score`` (an error, or ``None`` for sandboxes lost) stays the task's verifier error
    if the clean prepared state fails too; else it is the agent's 0, with the reason."""
    started = time.monotonic() if started is None else started
    try:
        clean: Score | None = await grade_from(prepared, check, prepared.image)
    except SandboxUnavailable:
        clean = None
    if clean is None or clean.error is not None:
        if score is None:
            raise SandboxUnavailable(f"verification of {prepared.task.id!r} keeps failing: {why}")
        return score  # test.sh fails on the clean state too: the task's verifier error
    blame = "test.sh could not score the agent's final state, though it scores the prepared "
    checks = [*(score.checks if score else []), _zero_check(blame + f"state: {why}")]
    for c in checks:
        c.error = False
    return Score(reward=0.0, passed=False, checks=checks, duration_s=time.monotonic() - started)


async def grade_from(
    prepared: Prepared,
    check: HarborCheck,
    source: str,
    beside: KeptServices | None = None,
    *,
    artifacts: Archive | None = None,
) -> Score:
    """Run test.sh in a new sandbox: of ``source`` (``final``; a compose task's beside the
    services ``beside``, or fresh ones), or of the verifier's own image (``separate``) with
    the ``artifacts`` collected from the agent's final state laid at their paths (none for
    the clean prepared state). Removed afterwards (the kept services stay)."""
    task = prepared.task
    assert task.tests is not None  # a Harbor task always has tests/ (checked at load)
    with scratch.folder("artifacts") as tmp:
        if check.mode == "separate":
            spec = separate_spec(prepared, check)
            tar = Path(tmp) / "carried.tar"
            parents = carried_tar(artifacts, tar) if artifacts is not None else []
            box = await create(spec)
        else:
            spec, parents = verifier_spec(prepared, source), []
            box = await _verifier_box(prepared, check, spec, beside)
        try:
            if parents:
                await _put_artifacts(box, tar, parents)
            return await verify_in_sandbox(box, task.tests, check, spec.workdir)
        finally:
            with anyio.CancelScope(shield=True):
                await box.close()


async def _verifier_box(
    prepared: Prepared, check: HarborCheck, spec: SandboxSpec, beside: KeptServices | None
) -> Sandbox:
    """test.sh's sandbox of the agent's final state: a new ``main`` beside the kept
    services, a new compose group (a compose task's clean state, or a snapshot whose
    services are gone), or a lone sandbox (every task without compose)."""
    if beside is not None:
        return await beside.create(spec)
    if prepared.task.compose is not None:
        return await start_compose(prepared.task, spec)
    return await create(spec)


def carried_tar(artifacts: Archive, tar: Path) -> list[str]:
    """Write to ``tar`` the collected artifacts (:mod:`agentenv.runner.artifacts`: only
    regular files and folders, ``exclude`` applied, a side service's too) named by the
    paths they came from, as Harbor lays them into a separate verifier; nothing under
    ``/tests`` or ``/logs/verifier`` (the verifier's own). Returns the folders to make
    first (the artifacts' parents)."""
    with tarfile.open(artifacts) as src:
        names = {m.name: m for m in src.getmembers()}
        manifest = names.get(MANIFEST)
        data = src.extractfile(manifest) if manifest is not None else None
        entries = json.loads(data.read())["entries"] if data is not None else []
        places = {
            e["destination"]: e["source"].rstrip("/")
            for e in entries
            if e.get("status") == "ok" and e.get("destination") not in (None, ".")
        }
        parents: dict[str, None] = {}
        with tarfile.open(tar, "w") as out:
            for name, member in names.items():
                target = _carried_name(name, places)
                if target is None or not (member.isfile() or member.isdir()):
                    continue
                if any(target == p or target.startswith(p + "/") for p in (TESTS, LOGS)):
                    continue  # laid down fresh for test.sh
                info = tarfile.TarInfo(target.lstrip("/"))
                info.type, info.mode, info.mtime = member.type, member.mode, member.mtime
                info.size = member.size if member.isfile() else 0
                out.addfile(info, src.extractfile(member) if member.isfile() else None)
                parents[str(PurePosixPath(target).parent)] = None
    return list(parents)


def _carried_name(name: str, places: dict[str, str]) -> str | None:
    """The path in the verifier of the collected entry ``name`` (under an artifact's
    destination), ``None`` if it is no artifact's."""
    for destination, source in places.items():
        if name == destination:
            return source or None
        if name.startswith(destination + "/"):
            return f"{source}/{name[len(destination) + 1 :]}"
    return None


async def _put_artifacts(box: Sandbox, tar: Path, parents: list[str]) -> None:
    made = await box.exec(["mkdir", "-p", "--", *parents], timeout=60)
    if not made.ok:
        log.info("harbor.artifact_parents", error=made.stderr[-300:])
    await box.upload_tar(tar, "/")


def flag_changes(score: Score, check: HarborCheck, changes: list[tuple[str, str]] | None) -> Score:
    """``score`` with the system files the agent changed (not allowed by the task) in its
    ``suspicious`` list, and reward 0 when the task's ``on_system_change`` is ``zero``."""
    if changes is None or score.error is not None:
        return score
    found = findings(changes, check.allow_system_changes)
    if not found:
        return score
    flags = [f"{NAME}: system file {line} by the agent" for line in found]
    update: dict[str, object] = {"suspicious": [*score.suspicious, *flags]}
    if check.on_system_change == "zero" and score.reward > 0:
        listed = ", ".join(found[:10])
        why = f"the agent changed system files the verifier may run ({listed}): scored 0"
        update |= {"reward": 0.0, "passed": False, "checks": [*score.checks, _zero_check(why)]}
    return score.model_copy(update=update)


def _zero_check(detail: str) -> CheckResult:
    return CheckResult(name="agent's final state", score=0.0, passed=False, detail=detail[:2000])


def _lost(why: str) -> Score:
    return Score(reward=0.0, passed=False, error=why)


__all__ = [
    "carried_tar",
    "flag_changes",
    "grade_from",
    "harbor_verdict",
    "runs_apart",
    "separate_spec",
    "step_check",
]
