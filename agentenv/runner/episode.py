"""The one episode lifecycle: prepare → setup → steps → finish → verify.

Every driver (eval, ``agentenv run``, refactor's tests, ``rollout``, ``rollout_group``,
partial rollouts, the Ray executor) goes through these functions, so they set up and verify
identically:

- :func:`prepare` makes the task's *prepared state*: its image, plus (when the task has a
  ``setup`` or a group shares one) a snapshot taken after the setup ran, as root, in a
  container nothing of the agent's has touched; and the workdir's contents as a tar.
- :func:`start_sandbox` makes the agent's sandbox from it: by default an unprivileged user
  on a read-only root filesystem whose only writable places are the workdir and ``/tmp``,
  both bounded.
- :func:`finish` takes the agent's final workdir (the sandbox frozen while it is read) and
  makes it safe to carry over: regular files, folders and symlinks that stay inside it
  (:func:`~agentenv.runner.workspace.safe_workspace`).
- :func:`verify_final` scores it in a *new* checker sandbox made from the prepared state:
  nothing the agent's processes touched outside the workdir reaches the verdict. When a
  check cannot run there, the same check runs on the untouched prepared state: if it runs
  there, the failure was the agent's doing and is graded 0; only a check that also fails on
  the clean state is a verifier error.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict

from agentenv.agent.loop import new_trajectory, run_episode
from agentenv.agent.policies import lay_out
from agentenv.agent.trajectory import Limits, ToolResultCallback, Trajectory
from agentenv.archive import Archive
from agentenv.errors import TaskError
from agentenv.formats.harbor.compose import start_compose
from agentenv.harnesses.base import Harness
from agentenv.log import get_logger
from agentenv.model.client import EventCallback
from agentenv.model.types import ChatModel
from agentenv.runner.artifacts import Collecting, collect_before_pause, collect_paused
from agentenv.runner.harbor_verdict import harbor_verdict
from agentenv.runner.harness import (
    Agent,
    HarnessBox,
    harness_box,
    play,
    refuse_task,
    resolve_agent,
)
from agentenv.runner.healthcheck import wait_healthy
from agentenv.runner.image_user import build_timeout_named, with_image_user
from agentenv.runner.offer import offered, skills_of
from agentenv.runner.system_changes import container_changes
from agentenv.runner.workspace import safe_workspace, workspace_tar
from agentenv.sandbox import (
    Sandbox,
    SandboxError,
    SandboxSpec,
    Snapshot,
    create,
    default_backend,
    hand_back,
    handed_back,
    remove_snapshot,
    reuse_or_create,
)
from agentenv.sandbox.errors import ArchiveTooLarge, EngineUnavailable, SandboxUnavailable
from agentenv.sandbox.images import BASE_IMAGE, dockerfile_image
from agentenv.tasks import Task
from agentenv.verify import (
    CHECKER_CAPS,
    ROOT,
    CheckResult,
    Score,
    Workspace,
    in_agent_grader,
    verify,
)
from agentenv.verify.kinds.harbor import HarborCheck

log = get_logger(__name__)

KEEP_FINAL_S = 14 * 86400.0  # how long a kept final state survives `agentenv gc`
SETUP_TIMEOUT_S = 3600.0
_ROOT = "0:0"
CHECKER_CPU_SHARES = 512
"""A checker sandbox's CPU weight, half an agent sandbox's: with many episodes at once on
few cores, an agent's command (which the model waits on, its sandbox running) goes before
verification, two to one. Weights only split contended cores: alone, a checker runs at full
speed. It was an eighth (128): bench/rl.py (50 at once, 2 cores) had an agent's first
command at 93 ms p50 instead of 356 ms at equal weight (256: 145 ms; 512 not measured).
But a weight is relative to every container on the engine and the host's other work, not
only to our agents: at 128 a checker starved behind whatever else ran, and verification
was most of an eval job's time. bench/verify_share.py (main job, 2 jobs each, on a host
loaded by other work, load 8 to 17; issue 30), against the revision before (128, without
the fewer stops and layouts and the hand-backs beside the checks, which alone measured
0.95x, 1.01x and 1.03x): 512 gave verification 0.66x, episode time 0.75x and the job's
wall time 0.76x; 1024 gave 0.67x, 0.86x and 0.88x. Half keeps the agents first and gets
the gain."""


class Prepared(BaseModel):
    """A task's prepared state: the image every sandbox of an episode starts from (the
    task's, or a snapshot after its setup) and the workdir's contents. JSON-serialisable,
    so a suspended rollout can carry it to another process."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    task: Task
    image: str
    backend: str  # the sandbox backend that runs the episode's sandboxes
    dockerfile: Path | None = None
    workspace: Archive  # a tar, entries relative to the workdir, owned by the agent's user
    snapshot: Snapshot | None = None  # ours to remove with :func:`release`

    @property
    def agent_user(self) -> str:
        """``uid:gid`` of the agent (``0:0`` when the task asks for root)."""
        return _ROOT if self.task.user == "root" else self.task.user

    @property
    def recyclable(self) -> bool:
        """Whether its sandboxes may be kept for another episode (within a
        :func:`~agentenv.sandbox.recycling` block): not when made from its snapshot, which
        :func:`release` removes."""
        return self.snapshot is None


class Final(BaseModel):
    """What an episode leaves for the verifier: the agent's workdir, made safe, and (for a
    task that verifies in its final state) the snapshot of the agent's sandbox."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    workspace: Archive
    snapshot: Snapshot | None = None
    rejected: str | None = None  # why the final workdir could not be taken: scored 0
    # a task verified where the agent worked (Harbor's): its score, taken before the
    # sandbox was closed
    score: Score | None = None
    # a Harbor task's: what the engine says the agent changed outside its workdir
    # (:mod:`agentenv.runner.system_changes`), None where it cannot say
    system_changes: list[tuple[str, str]] | None = None
    # a Harbor task's artifacts with their manifest.json (:mod:`agentenv.runner.artifacts`)
    artifacts: Archive | None = None


def agent_spec(
    prepared: Prepared, *, outlive_owner: bool = False, harness: HarnessBox | None = None
) -> SandboxSpec:
    """The agent's sandbox: unprivileged and read-only unless the task says otherwise. With
    a ``harness``, its image (the prepared one with the harness on top) and its gateway
    folder, mounted read-only (:mod:`agentenv.runner.harness`)."""
    task = prepared.task
    root = task.user == "root"
    return SandboxSpec(
        backend=prepared.backend,
        image=prepared.image if harness is None else harness.image,
        dockerfile=prepared.dockerfile if harness is None else None,
        gateway_dir=None if harness is None else harness.gateway_dir,
        build_timeout_s=task.build_timeout_s,
        workdir=task.workdir,
        user=None if root else task.user,
        image_entrypoint=task.image_entrypoint,
        read_only=task.read_only and not root,
        disk=task.disk,
        network=task.network,
        allowed_hosts=task.allowed_hosts,
        cpus=task.cpus,
        memory=task.memory,
        env={**({} if root else {"HOME": "/tmp"}), **task.env},  # the task's: Harbor's
        outlive_owner=outlive_owner,
    )


def checker_spec(image: str, task: Task, backend: str) -> SandboxSpec:
    """A checker sandbox: root that can lay files out and drop to the agent's user, on a
    read-only root filesystem (so the agent's code run by a check can leave nothing behind
    but in the workdir, ``/tmp`` and ``/dev/shm``, which are wiped between checks). When
    the host's cores are contended it yields to agent sandboxes (:data:`CHECKER_CPU_SHARES`)."""
    return SandboxSpec(
        backend=backend,
        image=image,
        cpu_shares=CHECKER_CPU_SHARES,
        workdir=task.workdir,
        user=_ROOT,
        cap_add=CHECKER_CAPS,
        read_only=True,
        disk=task.disk,
        scratch=(ROOT,),
        env={"HOME": "/tmp"},
    )


async def prepare(
    task: Task,
    *,
    share: bool = False,
    keep_s: float | None = None,
    workspace: Path | None = None,
    backend: str | None = None,
    steps: bool = False,
) -> Prepared:
    """The task's prepared state. A task with a ``setup`` (or ``share=True``, for a group
    forked from one prepared sandbox) runs it once, as root, in a container of its own,
    and is snapshotted; with ``keep_s`` the snapshot outlives this process that long.
    ``workspace`` replaces the task's ``workspace/`` folder (a repo's clone, say). Release
    it with :func:`release`. Its sandboxes are ``backend``'s (the default one for ``None``).
    A multi-step task is refused unless ``steps`` (:mod:`agentenv.runner.steps` runs it,
    from :func:`run_task` and the RL rollouts): no other driver may run it as one step
    without a word."""
    if task.multi_step is not None and not steps:
        raise TaskError(f"task {task.id!r} has steps: only run_task and the RL rollouts run them")
    with build_timeout_named(task):  # the image is built first here (or just below)
        task = await with_image_user(task, backend or default_backend())  # a name: uid:gid
    dockerfile = task.folder / task.dockerfile if task.folder and task.dockerfile else None
    user = _ROOT if task.user == "root" else task.user
    folder = workspace if workspace is not None else task.workspace
    backend = backend or default_backend()
    if task.compose is not None and backend != "docker":
        raise SandboxError(f"task {task.id!r}: compose environments need the docker backend")
    # without a workspace folder, an image of the task's own keeps the workdir's files (a
    # SWE-bench image's repo): they are read from a container of it, since the agent's
    # bounded workdir is a fresh volume that starts empty
    from_image = folder is None and task.read_only and task.image != BASE_IMAGE
    if not task.setup and not share and dockerfile is None and not from_image:
        archive = workspace_tar(folder, user)
        return Prepared(task=task, image=task.image, backend=backend, workspace=archive)
    spec = SandboxSpec(
        backend=backend,
        image=task.image
        if dockerfile is None
        else dockerfile_image(task.image, dockerfile, task.id),
        dockerfile=dockerfile,
        build_timeout_s=task.build_timeout_s,
        workdir=task.workdir,
        user=_ROOT,
        cap_add=CHECKER_CAPS,
        image_entrypoint=task.image_entrypoint,  # its snapshot keeps the image's entrypoint
    )
    with build_timeout_named(task):
        box = await create(spec)
    try:
        if folder is not None:
            await box.upload(folder, task.workdir)
        if task.setup:
            done = await box.exec(task.setup, timeout=SETUP_TIMEOUT_S, cwd=task.workdir)
            if not done.ok:
                raise SandboxError(
                    f"setup of task {task.id!r} failed (exit {done.exit_code}): "
                    f"{(done.stdout + done.stderr).strip()[-1000:]}"
                )
        archive, _ = safe_workspace(await _download(box, task.workdir), task.workdir, user)
        snapshot = await box.snapshot(keep_s=keep_s) if task.setup or share else None
    finally:
        with anyio.CancelScope(shield=True):
            await box.close()
    image = snapshot.ref if snapshot else box.image
    return Prepared(task=task, image=image, backend=backend, workspace=archive, snapshot=snapshot)


async def _remove_snapshot(snapshot: Snapshot) -> None:
    """Remove a snapshot, or leave it to `agentenv gc` (labelled) when it cannot go now."""
    try:
        await remove_snapshot(snapshot)
    except SandboxError as e:
        log.warning("episode.snapshot_left", ref=snapshot.ref, error=str(e))


async def release(prepared: Prepared) -> None:
    """Remove the prepared state's snapshot, if it has one (once no sandbox uses it). One
    that cannot go now (the engine restarting, a sandbox of it not yet removed) is left for
    `agentenv gc`, which knows it by its labels: it must not fail what used it."""
    if prepared.snapshot is not None:
        with anyio.CancelScope(shield=True):
            await _remove_snapshot(prepared.snapshot)


async def start_sandbox(
    prepared: Prepared, *, outlive_owner: bool = False, harness: HarnessBox | None = None
) -> Sandbox:
    """An agent sandbox at the prepared state, new or (within a
    :func:`~agentenv.sandbox.recycling` block) recycled; the caller closes it or hands it
    back. A ``harness``'s is always new (it mounts a folder of its episode's)."""
    spec = agent_spec(prepared, outlive_owner=outlive_owner, harness=harness)
    task = prepared.task
    if task.compose is not None:  # the services of its compose file, main among them
        box = await start_compose(task, spec)
    else:
        fresh = outlive_owner or harness is not None
        box = await (create(spec) if fresh else reuse_or_create(spec))
    try:
        await box.upload_tar(prepared.workspace, task.workdir)
        if task.healthcheck is not None:  # the agent gets it only once it passes
            await wait_healthy(box, task.healthcheck, task_id=task.id, workdir=task.workdir)
    except BaseException:
        await box.close()
        raise
    return box


async def finish(box: Sandbox, prepared: Prepared) -> Final:
    """The agent's final state, read with the sandbox frozen (a process the agent left
    cannot change it meanwhile). The sandbox is left paused; the caller closes it."""
    task = prepared.task
    collecting = Collecting(box, task.verifier) if isinstance(task.verifier, HarborCheck) else None
    if collecting is not None:  # the task's collect commands in main, before it freezes
        await collect_before_pause(collecting)
    await box.pause()
    try:
        raw = await _download(box, task.workdir, max_bytes=final_limit(task))
    except ArchiveTooLarge as e:
        # nothing of it is taken: an empty workspace would pass a check that files are gone
        log.info("episode.final_too_large", task=task.id, error=str(e))
        return Final(workspace=workspace_tar(None, prepared.agent_user), rejected=str(e))
    archive, dropped = safe_workspace(raw, task.workdir, prepared.agent_user)
    if dropped:
        log.info("episode.dropped", task=task.id, entries=dropped[:20], n=len(dropped))
    harbor = isinstance(task.verifier, HarborCheck)
    changes = await container_changes(box) if harbor else None
    artifacts = await collect_paused(collecting) if collecting is not None else None
    snapshot = await box.snapshot() if task.verify_in == "final" else None
    score = None
    grade = in_agent_grader(task.verifier) if task.verify_in == "agent" else None
    if grade is not None:
        assert task.tests is not None  # a Harbor task always has tests/ (checked at load)
        await box.resume()  # its processes run on: the tests may look at a service it left
        score = await grade(box, task.tests, task.workdir)
    return Final(
        workspace=archive,
        snapshot=snapshot,
        score=score,
        system_changes=changes,
        artifacts=artifacts,
    )


def final_limit(task: Task) -> int:
    """The largest tar of the agent's final workdir that is taken: twice what the workdir
    may hold, plus room for many small files' headers. A bounded workdir can still hold a
    sparse file far larger than its bound, whose tar would fill the host's disk."""
    return 2 * task.disk + (64 << 20)


async def _download(box: Sandbox, path: str, *, max_bytes: int | None = None) -> Archive:
    raw = Archive.new()
    await box.download_to(path, raw, max_bytes=max_bytes)
    return raw


async def verify_workspace(prepared: Prepared, workspace: Archive) -> Score:
    """Score a workspace archive (see :func:`safe_workspace`) with the task's verifier in a
    new checker sandbox at the prepared state: a repo's tests before and after a patch."""
    return await _verify_in(prepared.image, prepared, workspace)


class CheckerAhead:
    """A checker sandbox made while the agent works (then paused: it uses no CPU), so that
    verification does not wait for a container to be created. Never used before it is
    taken; see :func:`checker_ahead`."""

    def __init__(self, prepared: Prepared):
        self._prepared = prepared
        self._box: Sandbox | None = None
        self._made = anyio.Event()

    async def make(self) -> None:
        """Create and pause it; a failure leaves nothing (verification then makes its own)."""
        task = self._prepared.task
        try:
            prepared = self._prepared
            box = await reuse_or_create(checker_spec(prepared.image, task, prepared.backend))
            try:
                await box.pause()
            except BaseException:
                await box.close()
                raise
            self._box = box
        except Exception as e:
            log.info("episode.checker_ahead_failed", task=task.id, error=str(e))
        finally:
            self._made.set()

    async def take(self) -> Sandbox | None:
        """The sandbox, thawed and now the caller's to close (``None`` if it could not be
        made)."""
        await self._made.wait()
        box, self._box = self._box, None
        if box is not None:
            try:
                await box.resume()
            except BaseException:
                await box.close()
                raise
        return box

    async def discard(self) -> None:
        """Hand it back (unused: recycled if recycling) if nobody took it."""
        await self._made.wait()
        if self._box is not None:
            await hand_back(self._box, reusable=self._prepared.recyclable)
            self._box = None


@asynccontextmanager
async def checker_ahead(prepared: Prepared) -> AsyncIterator[CheckerAhead | None]:
    """Start making the episode's checker sandbox now, in the background; what is not
    taken by the end of the block is removed. Yields ``None`` for a task without a verifier
    or one verified in its final state."""
    task = prepared.task
    if task.verifier is None or task.verify_in in ("final", "agent"):
        yield None
        return
    ahead = CheckerAhead(prepared)
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(ahead.make)  # never raises
        try:
            yield ahead
        except Exception as e:  # the episode's own error: out as it is, not in a group
            error = e
        finally:
            with anyio.CancelScope(shield=True):
                await ahead.discard()
    if error is not None:
        raise error


HandBack = Callable[[Sandbox, bool], None]
"""Takes a checker sandbox whose verdict is in, to hand back (``reusable`` or not) later."""


async def _verify_in(
    image: str,
    prepared: Prepared,
    workspace: Archive,
    box: Sandbox | None = None,
    later: HandBack | None = None,
) -> Score:
    task = prepared.task
    assert task.verifier is not None
    ws = Workspace(archive=workspace, workdir=task.workdir, agent_user=prepared.agent_user)
    box = box or await reuse_or_create(checker_spec(image, task, prepared.backend))
    # recycled only if the agent's code ran unprivileged in it (a root process could have
    # tampered with what recycling keeps: init, the keep-alive), and not from a snapshot
    reusable = prepared.agent_user != _ROOT and prepared.recyclable and image == prepared.image
    if later is None:
        async with handed_back(box, reusable=reusable):
            return await verify(
                box, task.verifier, ws, tests=task.tests, prepared=prepared.workspace
            )
    try:
        score = await verify(box, task.verifier, ws, tests=task.tests, prepared=prepared.workspace)
    except BaseException:  # as handed_back(): a checker that failed is never recycled
        with anyio.CancelScope(shield=True):
            await box.close()
        raise
    later(box, reusable)  # the verdict is in: its sandbox goes off the verdict's path
    return score


async def verify_final(
    prepared: Prepared,
    final: Final,
    *,
    ahead: CheckerAhead | None = None,
    later: HandBack | None = None,
) -> Score | None:
    """Score the agent's final workspace in a new checker sandbox (``None`` without a
    verifier), the one made ``ahead`` if given. A check that cannot run on it but runs on
    the clean prepared state is the agent's failure: reward 0, with the reason in the
    checks. A checker sandbox lost under the final state is tried once more in a new one
    first (engine restarts kill checkers too). With ``later``, each checker sandbox that
    gave a verdict is passed to it to hand back instead of being handed back here (the
    caller must: see :meth:`Episode.conclude`)."""
    task = prepared.task
    if task.verifier is None:
        return None
    if isinstance(task.verifier, HarborCheck) and final.rejected is None:
        return await harbor_verdict(prepared, final)  # where its `mode` says
    if task.verify_in == "agent" and final.rejected is None:
        return final.score  # verified in the agent's sandbox, by finish()
    if final.rejected is not None:
        checks = _final_state_failed(f"the final workdir was not taken: {final.rejected}")
        return Score(reward=0.0, passed=False, checks=checks)
    started = time.monotonic()
    image = final.snapshot.ref if final.snapshot else prepared.image
    try:
        box = await ahead.take() if ahead is not None and final.snapshot is None else None
        score = await _verify_in(image, prepared, final.workspace, box, later)
        if score.error is None:
            return score
        why = score.error
    except EngineUnavailable:
        raise  # the host's trouble, not the agent's
    except SandboxUnavailable as e:
        why, score = str(e), None
    if score is None:
        # A checker lost may be the host's doing (an engine restarted under it, a sandbox
        # killed from outside): the agent is blamed only if its final state loses a second,
        # fresh checker too and the prepared state then verifies.
        try:
            score = await _verify_in(image, prepared, final.workspace, later=later)
            if score.error is None:
                return score
            why = score.error
        except SandboxUnavailable as e:
            why, score = str(e), None
    try:
        clean = await _verify_in(prepared.image, prepared, prepared.workspace, later=later)
    except SandboxUnavailable:
        clean = None
    if clean is None or clean.error is not None:
        if score is None:  # dies on the clean state too: infrastructure, retried
            raise SandboxUnavailable(f"verification of {task.id!r} keeps failing: {why}")
        return score  # the check is broken: a verifier error
    return Score(
        reward=0.0,
        passed=False,
        checks=[*(score.checks if score else []), *_blame(why)],
        duration_s=time.monotonic() - started,
    )


def _blame(why: str) -> list[CheckResult]:
    detail = "the checks could not run on the agent's final state, though they run on the "
    return _final_state_failed(detail + f"prepared state: {why}")


def _final_state_failed(detail: str) -> list[CheckResult]:
    return [CheckResult(name="agent's final state", score=0.0, passed=False, detail=detail[:2000])]


class Episode:
    """One episode's sandboxes from the agent's start to teardown: the end every driver
    (eval, ``agentenv run``, RL rollouts, refactor jobs) goes through, so a rule about it
    (what is verified where, which sandbox is kept, which snapshot removed) is written once.

    :meth:`conclude` takes the final state, hands the agent's sandbox back and verifies;
    :meth:`teardown` lets go of whatever is still held. Made by :func:`episode`, or by a
    driver that keeps the sandbox across calls (a partial rollout) when it ends."""

    def __init__(
        self,
        prepared: Prepared,
        box: Sandbox,
        *,
        ahead: CheckerAhead | None = None,
        reusable: bool | None = None,
        phases: dict[str, float] | None = None,
        harness: HarnessBox | None = None,
    ):
        self.prepared = prepared
        self.box: Sandbox | None = box
        self.ahead = ahead
        # a harness's sandbox mounts its episode's gateway folder: never another episode's
        kept = prepared.recyclable if reusable is None else reusable
        self.reusable = kept and harness is None
        self.final: Final | None = None
        self.timer = _Phases(phases)
        self.harness = harness  # who plays it, when not the built-in loop

    @property
    def sandbox(self) -> Sandbox:
        """The agent's sandbox, while the episode holds it."""
        assert self.box is not None, "the agent's sandbox was handed back"
        return self.box

    async def conclude(self) -> tuple[Final, Score | None]:
        """Take the final state (the sandbox frozen), verify it (:func:`verify_final`)
        and tear down: the score is ``None`` without a verifier. The agent's sandbox is
        handed back while verification runs, and each checker sandbox once its verdict is
        in; both are awaited before this returns (shielded: never left behind). Neither
        touches the verdict: the final state is taken before, and a checker has no
        network, so nothing reaches it from the agent's sandbox meanwhile."""
        box = self.sandbox
        error: Exception | None = None
        score: Score | None = None
        try:
            with self.timer("finish"):
                final = await finish(box, self.prepared)  # failing, teardown closes the box
            self.final, self.box = final, None
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._hand_back, box, self.reusable)

                def later(checker: Sandbox, reusable: bool) -> None:
                    tg.start_soon(self._hand_back, checker, reusable)

                try:
                    with self.timer("verify"):
                        score = await verify_final(
                            self.prepared, final, ahead=self.ahead, later=later
                        )
                except Exception as e:  # out as it is, not in a group
                    error = e
                closing = time.monotonic()
            self.timer.add("teardown", time.monotonic() - closing)
            if error is not None:
                raise error
        finally:
            await self.teardown()
        return final, score

    @staticmethod
    async def _hand_back(box: Sandbox, reusable: bool) -> None:
        """Hand a sandbox back (recycled or removed) whatever happens around it; one that
        cannot go now is left to `agentenv gc`, which knows it by its labels."""
        with anyio.CancelScope(shield=True):
            try:
                await hand_back(box, reusable=reusable)
            except Exception as e:  # never raises: the verdict does not depend on it
                log.warning("episode.hand_back_failed", id=box.id[:12], error=str(e))

    async def teardown(self) -> None:
        """Let go of what the episode still holds, whatever happened: the agent's sandbox
        (closed: an episode that did not conclude is never recycled) and the final
        state's snapshot, once verified (a kept final state is its workspace archive)."""
        with self.timer("teardown"), anyio.CancelScope(shield=True):
            box, self.box = self.box, None
            if box is not None:
                await box.close()
            if self.final is not None and self.final.snapshot is not None:
                await _remove_snapshot(self.final.snapshot)


@asynccontextmanager
async def episode(
    prepared: Prepared,
    *,
    ahead: bool = True,
    reusable: bool | None = None,
    phases: dict[str, float] | None = None,
    harness: Harness | None = None,
) -> AsyncIterator[Episode]:
    """``async with episode(prepared) as ep:`` an agent sandbox at the prepared state
    (``ep.sandbox``), with the checker sandbox made ahead while the agent works (unless
    ``ahead=False``); call ``await ep.conclude()`` to finish and verify. Whatever happens,
    the block's end tears the episode down (:meth:`Episode.teardown`) and removes the
    checker not taken. ``reusable=False`` never recycles the agent's sandbox.

    With a ``harness`` the agent's sandbox is made from the prepared image with the
    harness installed (built or taken from the cache, in the ``prepare`` phase) and a
    gateway folder of this episode's (``ep.harness``; removed after the sandbox), and is
    never recycled; the checker is made from the task's own image all the same."""
    timer = _Phases(phases)
    if harness is not None:
        refuse_task(prepared.task, harness)
    async with AsyncExitStack() as stack:
        hbox = None
        if harness is not None:
            with timer("prepare"):
                hbox = await stack.enter_async_context(
                    harness_box(
                        harness,
                        prepared.image,
                        backend=prepared.backend,
                        snapshot=prepared.snapshot is not None,
                    )
                )
        async with checker_ahead(prepared) if ahead else _nothing() as made:
            with timer("create"):
                box = await start_sandbox(prepared, harness=hbox)
            ep = Episode(prepared, box, ahead=made, reusable=reusable, phases=phases, harness=hbox)
            try:
                yield ep
            finally:
                await ep.teardown()
            closing = time.monotonic()  # the checker made ahead and not taken goes now
        timer.add("teardown", time.monotonic() - closing)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield None


async def run_task(
    task: Task,
    model: ChatModel,
    *,
    pause: bool = True,
    on_event: EventCallback | None = None,
    on_tool_result: ToolResultCallback | None = None,
    phases: dict[str, float] | None = None,
    backend: str | None = None,
    agent: Agent = None,
) -> tuple[Trajectory, Final]:
    """Run one episode of ``task`` with ``model``: prepare, the loop in a new agent
    sandbox, finish, verify in a new checker sandbox; every sandbox removed whatever
    happens. Returns the trajectory (with its score) and the final state (for
    ``--keep-final`` and regrading). ``phases``, if given, gets the seconds of each phase
    as it ends (``prepare``, ``create``, ``loop``, ``finish``, ``verify``, ``teardown``),
    so a failed episode still tells where its time went. Its sandboxes are ``backend``'s
    (the default one for ``None``).

    ``agent`` plays the episode: the built-in loop (``None``), or a harness by name or
    value, run in the agent's sandbox with its model calls through a gateway
    (:mod:`agentenv.runner.harness`); the rest of the lifecycle is the same."""
    harness = resolve_agent(agent)
    if harness is not None:
        refuse_task(task, harness)  # before any image is built
    if task.multi_step is not None:  # its steps over one sandbox: a room of its own
        from agentenv.runner.steps import run_steps

        return await run_steps(
            task,
            model,
            pause=pause,
            on_event=on_event,
            on_tool_result=on_tool_result,
            phases=phases,
            backend=backend,
        )
    timer = _Phases(phases)
    with timer("prepare"):
        prepared = await prepare(task, backend=backend)
    try:
        async with episode(prepared, phases=phases, harness=harness) as ep:
            with timer("loop"):
                traj = await play_episode(
                    ep,
                    model,
                    pause=pause,
                    on_event=on_event,
                    on_tool_result=on_tool_result,
                )
            final, traj.score = await ep.conclude()
        return traj, final
    finally:
        with timer("teardown"):
            await release(prepared)


async def play_episode(
    ep: Episode,
    model: ChatModel,
    *,
    limits: Limits | None = None,
    pause: bool = True,
    on_event: EventCallback | None = None,
    on_tool_result: ToolResultCallback | None = None,
    policy_version: int | str | None = None,
    into: Trajectory | None = None,
) -> Trajectory:
    """The agent's part of an episode, in ``ep``'s sandbox: the built-in loop with what
    the task offers (:func:`~agentenv.runner.offer.offered`), or the episode's harness
    through its gateway (:func:`~agentenv.runner.harness.play`); ``limits`` over the
    task's. A harness fills ``into`` (a new trajectory if not given) as it goes, so a
    caller that keeps it has the turns taken when it fails."""
    task = ep.prepared.task
    limits = limits or task.limits
    if ep.harness is not None:
        skills = await skills_of(task, ep.sandbox)  # named to the harness as to the loop
        traj = into or new_trajectory(task.instruction + skills, task_id=task.id)
        return await play(
            ep.harness,
            ep.sandbox,
            model,
            traj,
            instruction=task.instruction + skills,
            limits=limits,
            pause=pause,
            on_event=on_event,
            policy_version=policy_version,
        )
    await lay_out(model, ep.sandbox)  # the oracle's /solution, by root
    async with offered(task, ep.sandbox) as offer:
        return await run_episode(
            model,
            ep.sandbox,
            offer.told(task.instruction),
            task_id=task.id,
            limits=limits,
            tools=offer.tools,
            pause=pause,
            on_event=on_event,
            on_tool_result=on_tool_result,
            policy_version=policy_version,
        )


class _Phases:
    """Adds the seconds spent in named phases to a dict (or to nothing)."""

    def __init__(self, into: dict[str, float] | None):
        self.into = into

    def add(self, name: str, seconds: float) -> None:
        if self.into is not None:
            self.into[name] = self.into.get(name, 0.0) + seconds

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)


async def regrade_final(task: Task, final: Final, *, backend: str | None = None) -> Score | None:
    """Score a kept final workspace again, against the task as its folder is now, in a
    checker sandbox of ``backend`` (the default one for ``None``)."""
    prepared = await prepare(task, backend=backend)
    try:
        return await verify_final(prepared, final)
    finally:
        await release(prepared)
