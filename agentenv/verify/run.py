"""One verification: a checker sandbox laid out (:func:`lay_out`), then the task's check
scored in it by its kind's scorer (:func:`verify`); and the seam for kinds graded in the
agent's own sandbox instead (:func:`in_agent_grader`)."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from agentenv.archive import Archive
from agentenv.sandbox.errors import SandboxError, SandboxUnavailable
from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.base import (
    CHECKERS,
    CHECKERS_DIR,
    ORIGINAL,
    OUT,
    ROOT,
    TESTS,
    Run,
    Workspace,
    clear,
    empty_workspace,
    run_checked,
)
from agentenv.verify.kinds import Check
from agentenv.verify.kinds.outputs import without_cases
from agentenv.verify.registry import IN_AGENT_SANDBOX, score_check
from agentenv.verify.score import Score


async def lay_out(
    sandbox: Sandbox,
    tests: Path | None,
    workspace: Workspace,
    originals: Archive | None = None,
) -> None:
    """Lay out a checker sandbox: ``/agentenv`` (root's, 0700 for the hidden tests) with the
    checker programs and the hidden tests, ``originals`` (workdir files as they were before
    the agent) in :data:`ORIGINAL`, and the agent's workspace in the workdir. A few
    commands and archives, whatever the number of files."""
    await run_checked(sandbox, f"mkdir -p {ROOT} && {clear(ROOT)}", timeout=60)
    await sandbox.upload_tar(_checker_files(tests), ROOT)
    await run_checked(
        sandbox,
        f"mkdir -p {OUT} {TESTS} {ORIGINAL} && chmod 0755 {ROOT} {CHECKERS}"
        f" && chmod 0700 {TESTS} {OUT} {ORIGINAL} && {empty_workspace(workspace)}",
        timeout=60,
    )
    if originals is not None:
        await sandbox.upload_tar(originals, ORIGINAL)
    await sandbox.upload_tar(workspace.archive, workspace.workdir)


prepare = lay_out
"""The name :func:`lay_out` had first (it lays a checker sandbox out; it prepares nothing)."""


def originals(prepared: Archive, keep: set[str]) -> Archive:
    """The regular files of a prepared workspace (the workdir before the agent, made on the
    host) named in ``keep``, and every ``conftest.py`` outside ``.git``, as a tar owned by
    root: read as the archive streams, never whole."""
    out = Archive.new()
    with tarfile.open(prepared, mode="r|") as src, tarfile.open(out, mode="w") as dst:
        for member in src:
            name = member.name.removeprefix("./")
            conftest = name.rsplit("/", 1)[-1] == "conftest.py" and not name.startswith(".git/")
            if member.isfile() and (name in keep or conftest):
                member.name, member.uid, member.gid = name, 0, 0
                member.uname = member.gname = "root"
                dst.addfile(member, src.extractfile(member))
    return out


def _checker_files(tests: Path | None) -> bytes:
    """``verifiers/`` (our checkers) and ``tests/`` (the task's hidden tests) as one tar,
    owned by root."""

    def root(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in info.name.split("/"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(CHECKERS_DIR, arcname=CHECKERS.rsplit("/", 1)[1], filter=root)
        if tests is not None and tests.is_dir():
            tar.add(tests, arcname=TESTS.rsplit("/", 1)[1], filter=root)
    return buf.getvalue()


async def verify(
    sandbox: Sandbox,
    check: Check,
    workspace: Workspace,
    *,
    tests: Path | None = None,
    prepared: Archive | None = None,
) -> Score:
    """Score ``check`` against ``workspace`` in ``sandbox``, a checker sandbox: a new one,
    made from the task's prepared state, whose root may switch users (:data:`CHECKER_CAPS`).
    ``prepared`` is the workdir as the agent was given it (a swebench check takes the test
    files from it, never from the agent's). Raises :class:`SandboxUnavailable` if the
    sandbox dies; any other failure to check is ``Score.error``."""
    started = time.monotonic()
    run = Run(sandbox, workspace, tests, prepared)
    try:
        with without_cases(tests, check) as sandbox_tests:  # expected outputs stay here
            keep = set(check.kept())
            kept = originals(prepared, keep) if keep and prepared is not None else None
            await lay_out(sandbox, sandbox_tests, workspace, kept)
        result, leaves = await score_check(run, check)
        await run.stop_agent()
    except SandboxUnavailable:
        raise
    except (SandboxError, OSError) as e:
        return Score(
            reward=0.0,
            passed=False,
            error=f"{type(e).__name__}: {e}",
            duration_s=time.monotonic() - started,
        )
    errors = [c for c in leaves if c.error]
    return Score(
        reward=0.0 if errors else result.score,
        passed=not errors and result.passed,
        checks=leaves,
        error="; ".join(f"{c.name}: {c.detail}" for c in errors) or None,
        duration_s=time.monotonic() - started,
    )


def in_agent_grader(
    check: Check | None,
) -> Callable[[Sandbox, Path, str], Awaitable[Score]] | None:
    """How ``check`` is graded in the agent's own sandbox once the agent is done
    (``grade(sandbox, tests, workdir)``), or None when its kind is scored in a checker
    sandbox like every other (a Harbor task's ``test.sh`` inspects the system it left)."""
    if check is None:
        return None
    grader = IN_AGENT_SANDBOX.get(check.kind)
    if grader is None:
        return None

    async def grade(box: Sandbox, tests: Path, workdir: str) -> Score:
        return await grader(box, tests, check, workdir)

    return grade
