"""The ``swebench`` check: a SWE-bench instance's verdict from the repo's own tests after
its test patch (the instances are loaded by :mod:`agentenv.formats.swebench`)."""

from __future__ import annotations

import shlex
import time
from pathlib import PurePosixPath
from typing import Literal

import anyio
from pydantic import Field, model_validator

from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.base import (
    CHECKERS,
    MAX_REPORT,
    ORIGINAL,
    PYTEST_CONFIGS,
    ROOT,
    TESTS,
    CheckBase,
    Run,
    result,
)
from agentenv.verify.kinds.pytest import pytest_report
from agentenv.verify.registry import Scored, scorer
from agentenv.verify.score import CheckResult
from agentenv.verify.suspicious import OnSuspicious, apply_flags, scan


class SweBenchCheck(CheckBase):
    """A SWE-bench instance's verdict, from the repo's own pytest tests. In the checker
    sandbox the files the test patch touches and every ``conftest.py`` are put back as they
    were before the agent (taken from the prepared state, never from the agent's workdir),
    the test patch (``patch``, in the hidden tests) is applied to them, and the test files
    of the listed tests run as the agent's user with the repo's own configuration.
    Resolved (reward 1) when every ``fail_to_pass`` and ``pass_to_pass`` test passed; a
    test that is missing, skipped or xfailed did not.

    The repo's tests import the agent's code in the process that reports them, so the
    verdict is checked, not protected: what run_pytest.py sees that the report does not
    account for, and what the agent's changed files show (read on the host, findings the
    repo's files had before it left out), is flagged in ``suspicious``. ``on_suspicious``
    says what a flag does: ``"review"`` (the default here: a repo's own code and test suite
    may do what the heuristics look for, and an honest fix must not score 0 for it) keeps
    the score for a person; ``"zero"`` scores the instance 0 with the reasons (for RL on a
    repo known to raise no flag of its own)."""

    kind: Literal["swebench"]
    fail_to_pass: list[str] = Field(min_length=1)
    pass_to_pass: list[str] = Field([])
    test_files: list[str] = Field(min_length=1)  # what the test patch touches (workdir-relative)
    patch: str = "test.patch"
    python: str | None = None  # has the repo's dependencies; default: SWE-bench's, else python3
    args: list[str] = Field([])  # more pytest arguments
    timeout_s: float = Field(1800, gt=0)
    on_suspicious: OnSuspicious = "review"

    @model_validator(mode="after")
    def _paths(self) -> SweBenchCheck:
        for path in self.test_files:
            if path.startswith("/") or ".." in path.split("/") or not path.strip():
                raise ValueError(f"test_files: {path!r} is not a path inside the repo")
        for test in self.listed():
            path = test.split("::", 1)[0]
            if "::" not in test or path.startswith(("/", "-")) or ".." in path.split("/"):
                raise ValueError(
                    f"{test!r} is not a pytest node id (path/to/test_file.py::test_name)"
                )
        return self

    def listed(self) -> list[str]:
        """Every test the verdict reads."""
        return [*self.fail_to_pass, *self.pass_to_pass]

    def kept(self) -> list[str]:
        """The workdir's files the verdict takes as they were before the agent (every
        ``conftest.py`` too): what the test patch touches, the files of the listed tests,
        and pytest's configuration files in their folders below the repo's root (one planted
        there would move pytest's rootdir, and with it the tests' ids)."""
        files = {*self.test_files, *(test.split("::", 1)[0] for test in self.listed())}
        folders = {str(PurePosixPath(f).parent) for f in files}
        folders = {str(p) for f in folders for p in [PurePosixPath(f), *PurePosixPath(f).parents]}
        configs = {f"{d}/{name}" for d in folders - {"."} for name in PYTEST_CONFIGS}
        return sorted(files | configs)


SWEBENCH_PYTHON = "/opt/miniconda3/envs/testbed/bin/python"
"""Where SWE-bench's images keep the interpreter with the repo's dependencies."""
_PATCHED = f"{ROOT}/patched"
# run as the agent's user in the workdir: the files named go (the kept ones, and every
# conftest.py, found by root), and the kept ones come back as the test patch left them
_OVERLAY = (
    'set -euo pipefail; cd "$WORKDIR"; for f in "$@"; do rm -rf -- "$f"; done; '
    f'cp -R --preserve=mode,timestamps -- {_PATCHED}/. "$WORKDIR"/'
)


async def _swebench(run: Run, check: SweBenchCheck, flags: list[str]) -> list[CheckResult]:
    """The two lists' results; what run_pytest.py flags is added to ``flags``."""
    ws, box = run.ws, run.sandbox
    started = time.monotonic()

    def lists(detail: str, *, error: bool = False) -> list[CheckResult]:
        return [result(check, "FAIL_TO_PASS", 0.0, detail, error=error)]

    # the test patch, applied (as root, outside any repo) to the kept files as they were
    # before the agent: nothing of the agent's decides what the tests are
    patch = f"{TESTS}/{shlex.quote(check.patch)}"
    r = await box.exec(
        f"rm -rf {_PATCHED} && cp -a {ORIGINAL} {_PATCHED} && cd {_PATCHED} && "
        f"{{ git apply --whitespace=nowarn {patch} || patch --batch -p1 -i {patch}; }} && "
        f"chmod -R a+rX {_PATCHED}",
        timeout=300,
        env={"GIT_CEILING_DIRECTORIES": ROOT},
    )
    if not r.ok:
        tail = (r.stdout + r.stderr).strip()[-800:]
        return lists(f"the test patch does not apply to the repo as it was: {tail}", error=True)
    # every conftest.py, found by root (a folder the agent made unreadable hides nothing;
    # find follows no link), is removed by the agent's user with the kept files
    wd = ws.workdir.rstrip("/")
    found = await box.exec(
        ["find", wd, "-path", f"{wd}/.git", "-prune", "-o", "-name", "conftest.py", "-print0"],
        timeout=300,
        max_output=MAX_REPORT,
    )
    if not found.ok or found.truncated:
        return lists(f"the workdir's conftest.py files could not be listed: {found.stderr[-300:]}")
    conftests = [p.decode()[len(wd) + 1 :] for p in found.stdout_bytes.split(b"\0") if p]
    r = await box.exec(
        ["bash", "-c", _OVERLAY, "overlay", *check.kept(), *conftests],
        timeout=300,
        env={"WORKDIR": ws.workdir, "HOME": "/tmp"},
        user=ws.agent_user,
    )
    if not r.ok:  # the agent left its workdir so that its own user cannot put files back
        await run.stop_agent()
        tail = (r.stdout + r.stderr).strip()[-500:]
        return lists(f"the test files could not be put back in the workdir: {tail}")
    python, problem = await _interpreter(box, check.python, ws.workdir)
    if python is None:
        return lists(problem, error=True)
    files = sorted({test.split("::", 1)[0] for test in check.listed()})
    argv = [python, "-I", "-S", f"{CHECKERS}/run_pytest.py", "--repo", ws.agent_user, ws.workdir]
    try:
        r = await box.exec(
            [*argv, "--", *files, *check.args],
            timeout=check.timeout_s,
            cwd=ws.workdir,
            env={"HOME": "/tmp"},
            max_output=MAX_REPORT,
        )
    finally:
        await run.stop_agent()
    if r.timed_out:  # the code under test hung: the agent failing
        return lists(f"the tests timed out after {check.timeout_s:g} s")
    report, problem, crashed = pytest_report(r)
    if report is None:
        return lists(problem, error=crashed)
    said = report.get("suspicious")
    flags += [str(s) for s in said] if isinstance(said, list) else []
    outcomes = report["outcomes"]
    took = time.monotonic() - started
    out = []
    for name, tests in (("FAIL_TO_PASS", check.fail_to_pass), ("PASS_TO_PASS", check.pass_to_pass)):
        seen = {test: str(outcomes.get(test, "missing")) for test in tests}
        bad = [f"{t} ({o})" for t, o in seen.items() if o != "passed"]
        detail = f"{len(tests) - len(bad)}/{len(tests)} passed"
        if bad:
            detail += f"; not passed: {', '.join(bad[:10])}" + (" ..." if len(bad) > 10 else "")
        one = result(check, name, float(not bad), detail)
        out.append(one.model_copy(update={"tests": seen, "name": name, "duration_s": took}))
    return out


@scorer("swebench")
async def _scored(run: Run, check: SweBenchCheck) -> Scored:
    await run.before_leaf()
    flags: list[str] = []  # what run_pytest.py saw, added by _swebench
    if run.prepared is not None:  # read on the host, from the tar: not by the agent's code
        flags += await anyio.to_thread.run_sync(scan, run.ws.archive, run.prepared)
    lists = await _swebench(run, check, flags)
    # the flags go on the first list's result (the verdict reads the leaves), once
    lists[0] = apply_flags(lists[0], flags, check.on_suspicious)
    passed = all(one.passed for one in lists)
    detail = "; ".join(f"{one.name} {one.detail}" for one in lists)
    return result(check, "swebench", float(passed), detail), lists


async def _interpreter(box: Sandbox, given: str | None, workdir: str) -> tuple[str | None, str]:
    """The interpreter the repo's tests run with, found by root (the image's ``PATH``), and
    never one the agent could have written: neither its path nor where its links lead may
    be in the workdir, ``/tmp``, ``/dev/shm`` or ``/agentenv``. ``None`` and why, else."""
    wanted = [given] if given else [SWEBENCH_PYTHON, "python3"]
    r = await box.exec(
        [
            "/bin/sh",
            "-c",
            'for p in "$@"; do q=$(command -v -- "$p") && printf "%s\\n" "$q" && '
            'readlink -f -- "$q" && exit 0; done; exit 1',
            "interpreter",
            *wanted,
        ],
        timeout=60,
    )
    paths = r.stdout.splitlines()
    if not r.ok or len(paths) != 2:
        return None, f"no Python interpreter in the image: {' or '.join(wanted)}"
    unsafe = [p.rstrip("/") for p in (workdir, "/tmp", "/dev/shm", ROOT)]
    for path in paths:
        if not path.startswith("/") or any(path == u or path.startswith(u + "/") for u in unsafe):
            return None, f"the interpreter {path!r} is where the agent can write: not run"
    return paths[0], ""
