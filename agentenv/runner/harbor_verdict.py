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

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import anyio

from agentenv import scratch
from agentenv.formats.harbor.compose import start_compose
from agentenv.log import get_logger
from agentenv.runner.system_changes import findings
from agentenv.sandbox import SandboxSpec, create
from agentenv.sandbox.errors import ArchiveTooLarge, EngineUnavailable, SandboxUnavailable
from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.base import CHECKER_CAPS
from agentenv.verify.kinds.harbor import ARTIFACTS, NAME, HarborCheck, verify_in_sandbox
from agentenv.verify.score import CheckResult, Score

if TYPE_CHECKING:
    from agentenv.runner.episode import Final, Prepared
    from agentenv.sandbox.compose.sandbox import KeptServices

log = get_logger(__name__)

MAX_ARTIFACTS = 512 << 20  # bytes of one artifact carried into a separate verifier


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
            score = await _graded_apart(prepared, check, final.snapshot.ref, beside)
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
    prepared: Prepared, check: HarborCheck, source: str, beside: KeptServices | None = None
) -> Score:
    """Grade from ``source`` (the agent's snapshot; beside the services it kept, if any),
    once more in a new sandbox if the first is lost; an error there is the agent's 0 if
    the clean prepared state grades."""
    started = time.monotonic()
    why = ""
    for _ in range(2):
        try:
            score = await grade_from(prepared, check, source, beside)
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
    prepared: Prepared, check: HarborCheck, source: str, beside: KeptServices | None = None
) -> Score:
    """Run test.sh in a new sandbox: of ``source`` (``final``; a compose task's beside the
    services ``beside``, or fresh ones), or of the verifier's image with ``source``'s
    artifacts copied in (``separate``). Removed afterwards (the kept services stay)."""
    task = prepared.task
    assert task.tests is not None  # a Harbor task always has tests/ (checked at load)
    with scratch.folder("artifacts") as tmp:
        carried: list[tuple[str, str]] = []
        if check.mode == "separate":
            carried = await _take_artifacts(prepared, check, source, tmp)
        image = source if check.mode == "final" else (check.image or prepared.image)
        box = await _verifier_box(prepared, check, image, beside)
        try:
            await _put_artifacts(box, carried)
            return await verify_in_sandbox(box, task.tests, check, task.workdir)
        finally:
            with anyio.CancelScope(shield=True):
                await box.close()


async def _verifier_box(
    prepared: Prepared, check: HarborCheck, image: str, beside: KeptServices | None
) -> Sandbox:
    """test.sh's sandbox of ``image``: a new ``main`` beside the kept services, a new
    compose group (a compose task's clean state, or a snapshot whose services are gone),
    or a lone sandbox (``separate``, as Harbor's, and every task without compose)."""
    spec = verifier_spec(prepared, image)
    if beside is not None:
        return await beside.create(spec)
    if prepared.task.compose is not None and check.mode != "separate":
        return await start_compose(prepared.task, spec)
    return await create(spec)


async def _take_artifacts(
    prepared: Prepared, check: HarborCheck, source: str, tmp: str
) -> list[tuple[str, str]]:
    """Each declared artifact (and ``/logs/artifacts``) as a tar read from a sandbox of
    ``source``, with none of the agent's processes: ``(tar path, where it goes)``."""
    mains = [a for a in check.artifacts if a.service in (None, "main")]  # a side's is not here
    paths = dict.fromkeys([ARTIFACTS, *(a.source.rstrip("/") or "/" for a in mains)])
    box = await create(verifier_spec(prepared, source))
    taken = []
    try:
        for i, path in enumerate(paths):
            tar = f"{tmp}/{i}.tar"
            try:
                await box.download_to(path, Path(tar), max_bytes=MAX_ARTIFACTS)
            except FileNotFoundError:
                continue  # Harbor skips an artifact that is not there
            except ArchiveTooLarge as e:
                log.info("harbor.artifact_too_large", path=path, error=str(e))
                continue
            taken.append((tar, str(PurePosixPath(path).parent)))
    finally:
        with anyio.CancelScope(shield=True):
            await box.close()
    return taken


async def _put_artifacts(box: Sandbox, carried: list[tuple[str, str]]) -> None:
    for tar, parent in carried:
        made = await box.exec(["mkdir", "-p", "--", parent], timeout=60)
        if not made.ok:
            log.info("harbor.artifact_parent", parent=parent, error=made.stderr[-300:])
            continue
        await box.upload_tar(Path(tar), parent)


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


__all__ = ["flag_changes", "grade_from", "harbor_verdict", "runs_apart"]
