"""One verification: a checker sandbox laid out (:func:`lay_out`), then the task's check
scored in it by its kind's scorer (:func:`verify`); and the seam for kinds graded in the
agent's own sandbox instead (:func:`in_agent_grader`)."""

from __future__ import annotations

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
    """Lay out a checker sandbox: ``/agentenv`` (see :func:`hidden_files`) and the agent's
    workspace in the workdir. One command and two archives, whatever the number of files
    (:meth:`Run.lay_out`, which lays it out again before each leaf check)."""
    await Run(sandbox, workspace, hidden=hidden_files(tests, originals)).lay_out()


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


def hidden_files(tests: Path | None, originals: Archive | None = None) -> Archive:
    """What ``/agentenv`` holds, as one tar owned by root: ``verifiers/`` (our checkers,
    0755), ``tests/`` (the task's hidden tests, 0700), ``out/`` (0700) and ``original/``
    (0700: ``originals``, workdir files as they were before the agent). Modes are in the
    archive, so laying it out takes no command of its own; read-only to every uid but
    root (nothing in it is writable but by root). Built once per verification, laid out
    before every leaf check."""

    def owned(info: tarfile.TarInfo, top: str | None = None) -> tarfile.TarInfo | None:
        if "__pycache__" in info.name.split("/"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if info.name in _PRIVATE:
            info.mode = 0o700
        elif info.isdir() or info.mode & 0o111:
            info.mode = 0o755
        else:
            info.mode = 0o644
        return info

    def folder(name: str) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = tarfile.DIRTYPE
        info.mtime = int(time.time())
        return owned(info) or info

    out = Archive.new()
    with tarfile.open(out, mode="w") as tar:
        tar.add(CHECKERS_DIR, arcname=_name(CHECKERS), filter=owned)
        if tests is not None and tests.is_dir():
            tar.add(tests, arcname=_name(TESTS), filter=owned)
        else:
            tar.addfile(folder(_name(TESTS)))
        tar.addfile(folder(_name(OUT)))
        tar.addfile(folder(_name(ORIGINAL)))
        if originals is not None:
            with tarfile.open(originals, mode="r|") as src:
                for member in src:
                    member.name = f"{_name(ORIGINAL)}/{member.name}"
                    if member.isfile():
                        tar.addfile(owned(member) or member, src.extractfile(member))
    return out


def _name(path: str) -> str:
    """A folder of ``/agentenv`` as named in :func:`hidden_files`'s archive."""
    return path.removeprefix(f"{ROOT}/")


_PRIVATE = {_name(TESTS), _name(OUT), _name(ORIGINAL)}  # root's alone: 0700


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
    try:
        with without_cases(tests, check) as sandbox_tests:  # expected outputs stay here
            keep = set(check.kept())
            kept = originals(prepared, keep) if keep and prepared is not None else None
            hidden = hidden_files(sandbox_tests, kept)
        run = Run(sandbox, workspace, tests, prepared=prepared, hidden=hidden)
        await run.lay_out()
        result, leaves = await score_check(run, check)
        await run.stop_agent()
        await run.settle()
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
