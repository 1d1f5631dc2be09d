"""Deterministic verifiers: turn a sandbox's final state into a reward in [0, 1].

A task's ``[verifier]`` table picks a kind:

- ``command``: a command (run in the workdir) passes on exit 0;
- ``pytest``: the task's hidden tests; JUnit XML → the fraction passed (``partial``) or all
  or nothing;
- ``file``: a file exists / equals a text / matches a regex / has a sha256;
- ``json``: a JSON file equals a value, or contains it as a subset;
- ``image``: a valid PNG, not blank, at least a given size;
- ``outputs``: the agent's function (``module:function``) or program is run on the inputs of
  a cases file, as the agent's user; the sandbox only *produces* outputs (plain JSON or
  text), and the host compares them with the expected values, which never enter the
  sandbox (the cases file stays on the host) and never meet an object the agent built;
- ``composite``: checks combined by ``all``, ``any`` or ``weighted``;
- ``swebench``: a repo's own tests after a test patch (a SWE-bench instance, see
  :mod:`agentenv.swebench`): resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes.

The verifier runs in a *checker sandbox*: a new container made from the task's prepared
state (never the agent's container), into which only the agent's final workspace is copied,
with the checker programs of ``verifiers/`` and the task's hidden ``tests/`` under
``/agentenv`` (root's, mode 0700). The checker is root there; the agent's code never is:
pytest runs as the agent's user, command checks call the agent's programs through
``$AS_AGENT``, and before each leaf check the workspace is laid down afresh and every process
of the agent's user is killed (verification fails loudly if one survives). Whatever the
sandbox produced is parsed on the host with caps on size and depth; a parse that fails is a
failed check, never an exception. A check that cannot run gives a :class:`Score` with
``error`` set; the episode runner decides whether that is the agent's doing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
import shlex
import shutil
import tarfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv import scratch
from agentenv._resources import checkers_dir
from agentenv.archive import Archive
from agentenv.cases import Case, read_cases
from agentenv.sandbox.errors import SandboxError, SandboxUnavailable
from agentenv.sandbox.protocol import ExecResult, Sandbox

ROOT = "/agentenv"  # hidden tests, checkers and their output; never visible during the episode
TESTS = f"{ROOT}/tests"
CHECKERS = f"{ROOT}/verifiers"
OUT = f"{ROOT}/out"
ORIGINAL = f"{ROOT}/original"  # workdir files as they were before the agent (swebench)
CHECKERS_DIR = checkers_dir()  # the checker programs, from the package or the checkout
AGENT_USER = "1000:1000"
"""The agent's user (``uid:gid``) unless a task asks for root."""
AS_AGENT = f"python3 -I {CHECKERS}/as_agent.py"
"""How a check script runs one of the agent's programs: as the agent's user, no privileges."""
CHECKER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
"""What the checker sandbox's root may do: lay out files, and drop to the agent's user."""
MAX_REPORT = 8 << 20  # bytes of a report (JUnit, JSON, a file) the host will parse
MAX_DEPTH = 64  # nesting a JSON value may have
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


class CheckResult(BaseModel):
    """One check's outcome (a leaf of the task's ``[verifier]``). ``error`` means the check
    could not be made, which is not the agent failing it."""

    name: str = Field(
        description="the check's `name` in task.toml, else made from its kind and what it "
        "checks (`command make test`, `file answer.txt`; a swebench check's two lists are "
        "`FAIL_TO_PASS` and `PASS_TO_PASS`; a Harbor task's, each reward's key; `agent's "
        "final state` when the checks could not run on what the agent left)"
    )
    score: float = Field(
        description="in [0, 1]: 1 or 0, or the fraction of tests passed for a pytest check "
        "with `partial = true`"
    )
    passed: bool = Field(description="full marks (score 1) and the check could be made")
    detail: str = Field(
        "",
        description="what the check saw, for a person: the tail of a command's output after "
        "its exit code, `3/4 passed; failed: ...`, `content differs: ...`, `timed out after "
        "300 s`",
    )
    error: bool = Field(
        False,
        description="the check could not be made (a test file that does not collect, a "
        "checker that crashed): then the Score's `error` names it and its reward is not valid",
    )
    exit_code: int | None = Field(
        None, description="a command check's exit code; None for every other kind"
    )
    duration_s: float = Field(
        0.0, description="seconds the check ran (command and swebench checks; 0 for others)"
    )
    tests: dict[str, str] | None = Field(
        None,
        description="a swebench check's: each listed test's outcome (`passed`, `failed`, "
        "`error`, `skipped`, `missing`); None for other kinds",
    )


class Score(BaseModel):
    """What a verifier gave: reward in [0, 1], passed, the checks, and ``error`` when the
    verifier itself failed (then the reward is not valid)."""

    reward: float = Field(
        description="in [0, 1]: the verifier's score (a composite's combination of its "
        "checks, a partial pytest check's fraction); 0 when `error` is set, and then not a "
        "valid reward (`Trajectory.reward` is None)"
    )
    passed: bool = Field(description="full marks: reward 1, and no error")
    checks: list[CheckResult] = Field(
        [],
        description="each check's result, in the order of task.toml (a composite's parts, "
        "not the composite itself); empty when the verifier could not start",
    )
    error: str | None = Field(
        None,
        description="why the verifier itself could not score (a check that could not be "
        "made, the checker sandbox failing); None when it scored",
    )
    duration_s: float = Field(
        0.0, description="seconds the verification took, the checker sandbox's layout included"
    )


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    weight: float = Field(1.0, ge=0)


class CommandCheck(_Check):
    """Passes when ``command`` exits 0 (run by bash in the workdir, hidden tests in
    ``/agentenv/tests``). With ``user = "checker"`` (the default) it runs as root and must
    run the agent's programs through ``$AS_AGENT`` (e.g. ``$AS_AGENT ./prog < in``), which
    drops to the agent's user, who cannot read ``/agentenv``; with ``user = "agent"`` the
    whole command runs as the agent's user (no hidden files needed: a repo's own tests).
    Exit 126/127 (not runnable) is a verifier error, so a check script that runs the agent's
    programs should exit 1 when those are missing; a timeout is a failure (the agent's
    program hung)."""

    kind: Literal["command"]
    command: str
    timeout_s: float = Field(300, gt=0)
    user: Literal["checker", "agent"] = "checker"


class PytestCheck(_Check):
    """Runs pytest on the hidden tests with the workdir importable; the reward is the
    fraction passed, or 0/1 unless ``partial``. ``args`` go to pytest as given (default
    ``["."]``), read from the tests folder: paths and node ids in them are relative to it, as
    in ``["test_api.py", "--deselect", "test_api.py::test_slow", "-k", "not network"]``."""

    kind: Literal["pytest"]
    args: list[str] = ["."]
    partial: bool = False
    # "fail": a skipped test did not pass. "exclude": a test skipped by a skip/skipif marker
    # of the hidden tests is left out of the count; a skip raised while it ran (pytest.skip(),
    # importorskip: the agent's code can raise those) still counts as not passed
    skipped: Literal["fail", "exclude"] = "fail"
    timeout_s: float = Field(300, gt=0)


class FileCheck(_Check):
    """A file (relative to the workdir) exists and, if given, equals ``equals``, matches
    ``regex`` (search, multiline) or has ``sha256``."""

    kind: Literal["file"]
    path: str
    equals: str | None = None
    regex: str | None = None
    sha256: str | None = None
    strip: bool = True  # compare ``equals`` without surrounding whitespace


class JsonCheck(_Check):
    """A JSON file equals ``equals``, or contains ``subset`` (dicts recursively, lists
    element-wise, other values equal)."""

    kind: Literal["json"]
    path: str
    equals: Any = None
    subset: Any = None


class ImageCheck(_Check):
    """A valid PNG, not blank (more than one colour), at least ``min_width`` ×
    ``min_height``; checked inside the sandbox by ``verifiers/png_check.py``."""

    kind: Literal["image"]
    path: str
    min_width: int = Field(16, ge=1)
    min_height: int = Field(16, ge=1)
    timeout_s: float = Field(60, gt=0)


class OutputsCheck(_Check):
    """Runs the agent's ``function`` (``"module:function"``, imported from the workdir; or
    just ``"module"`` when every case names its function) or ``program`` (an argv, run in
    the workdir) on each case's inputs, as the agent's user, and compares what came out
    with the case's expectation on the host. ``cases`` is a JSON file in the task's hidden
    ``tests/``, read on the host only (never copied into a sandbox): a list of

    - for a function: ``{"name", "function"?, "args": [...], "kwargs": {...}}`` and
      ``"expect": value`` or ``"raises": "ValueError"`` (that class or a subclass; with
      ``"match": regex``, its message must contain a match, as in ``pytest.raises``), and
      optionally ``"expect_args"`` (the arguments as they are after the call: what it may
      or must not mutate). Inputs are JSON; ``{"$tuple": [...]}``, ``{"$set": [...]}``,
      ``{"$iter": [...]}`` and ``{"$bytes": "text"}`` stand for those Python values.
      Tuples come back as lists, unless the case has ``"keep_tuples": true`` (then as
      ``{"$tuple": [...]}``, to check a tuple is returned); anything JSON cannot hold
      (a custom object, NaN) fails the case.
    - for a program: ``{"name", "args": ["..."], "stdin": "...", "files": {"rel/path":
      "content"}}`` with ``"expect": "stdout"``, ``"exit_code"`` (0 unless given) and
      ``"stderr_contains"``. ``files`` are written to a folder of their own, readable by the
      agent's user; ``{inputs}`` in an argument is replaced by its path.

    Any case may set ``"timeout_s"`` (``timeout_s`` otherwise; all cases together have
    ``total_timeout_s``), ``"weight"`` and ``"requires"``: names of other cases, without
    which this one earns nothing (so that, say, rejecting bad input only counts next to
    parsing good input, not for a function that rejects everything). ``compare``: ``json`` (equal
    values; booleans are not numbers; numbers within ``abs_tol``; a program's stdout is
    parsed as JSON), ``text`` (trailing whitespace of each line and trailing blank lines
    ignored), ``lines`` (the same lines in any order, blank ones ignored) or ``exact``.
    ``build`` (a bash command, run as the agent's user in the workdir) runs first; when it
    fails, every case fails. The reward is the weighted fraction of cases passed (and whose
    ``requires`` passed) with ``partial``, else all or nothing. Loading the task refuses a
    missing or invalid cases file (:mod:`agentenv.cases` reads it, fields in
    ``docs/formats.md``); one that went bad after loading is a verifier error."""

    kind: Literal["outputs"]
    cases: str
    function: str | None = Field(None, pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$")
    program: list[str] | None = Field(None, min_length=1)
    build: str | None = None
    compare: Literal["json", "text", "lines", "exact"] = "json"
    abs_tol: float = Field(1e-9, ge=0)
    partial: bool = False
    timeout_s: float = Field(10, gt=0)  # per case
    total_timeout_s: float = Field(300, gt=0)  # all cases together; the rest then fail
    build_timeout_s: float = Field(300, gt=0)

    @model_validator(mode="after")
    def _function_or_program(self) -> OutputsCheck:
        if (self.function is None) == (self.program is None):
            raise ValueError("an outputs check needs either `function` or `program`")
        if Path(self.cases).is_absolute() or ".." in Path(self.cases).parts:
            raise ValueError(f"cases must be a path inside tests/, got {self.cases!r}")
        return self


class CompositeCheck(_Check):
    """Checks combined: ``all`` (1 only if every one passes), ``any``, or ``weighted`` (the
    weighted mean of their scores: partial credit)."""

    kind: Literal["composite"]
    mode: Literal["all", "any", "weighted"] = "all"
    checks: list[Check]


class HarborCheck(_Check):
    """A Harbor task's verifier: ``tests/`` is put at ``/tests`` in the agent's own sandbox
    once it is done, ``test.sh`` runs there, and the reward is what it wrote to
    ``/logs/verifier/reward.txt`` (a number) or ``reward.json`` (named numbers). See
    :mod:`agentenv.harbor`: only tasks loaded from Harbor's format carry it."""

    kind: Literal["harbor"]
    timeout_s: float = Field(600, gt=0)
    env: dict[str, str] = {}


class SweBenchCheck(_Check):
    """A SWE-bench instance's verdict, from the repo's own pytest tests. In the checker
    sandbox the files the test patch touches and every ``conftest.py`` are put back as they
    were before the agent (taken from the prepared state, never from the agent's workdir),
    the test patch (``patch``, in the hidden tests) is applied to them, and the test files
    of the listed tests run as the agent's user with the repo's own configuration.
    Resolved (reward 1) when every ``fail_to_pass`` and ``pass_to_pass`` test passed; a
    test that is missing, skipped or xfailed did not."""

    kind: Literal["swebench"]
    fail_to_pass: list[str] = Field(min_length=1)
    pass_to_pass: list[str] = []
    test_files: list[str] = Field(min_length=1)  # what the test patch touches (workdir-relative)
    patch: str = "test.patch"
    python: str | None = None  # has the repo's dependencies; default: SWE-bench's, else python3
    args: list[str] = []  # more pytest arguments
    timeout_s: float = Field(1800, gt=0)

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


Check = Annotated[
    CommandCheck
    | PytestCheck
    | FileCheck
    | JsonCheck
    | ImageCheck
    | OutputsCheck
    | CompositeCheck
    | HarborCheck
    | SweBenchCheck,
    Field(discriminator="kind"),
]
CompositeCheck.model_rebuild()


class Workspace(BaseModel):
    """What a checker sandbox verifies: the agent's final workdir as a tar archive whose
    entries are relative to the workdir (made safe by the episode runner), and the user the
    agent ran as."""

    archive: Archive  # validates from bytes too
    workdir: str = "/workspace"
    agent_user: str = AGENT_USER


class _Run:
    """One verification in a checker sandbox: lays the workspace down before each leaf
    check (so no check sees what an earlier one's agent code left) and stops the agent's
    processes after each."""

    def __init__(self, sandbox: Sandbox, workspace: Workspace, tests: Path | None = None):
        self.sandbox = sandbox
        self.ws = workspace
        self.tests = tests  # the task's hidden tests on the host (an outputs check's cases)
        self.leaves = 0

    async def fresh_workspace(self) -> None:
        """The agent's workspace as it handed it in, and nothing it left in /tmp or
        /dev/shm (the only other places the agent's user can write)."""
        await _run(self.sandbox, _empty(self.ws), timeout=120)
        await self.sandbox.upload_tar(self.ws.archive, self.ws.workdir)

    async def stop_agent(self) -> None:
        """Kill every process of the agent's user; raise if one survives (fails loudly)."""
        if self.ws.agent_user.split(":")[0] in ("0", "root"):
            return  # a root agent's leftovers cannot be told from ours; each check is fresh
        r = await self.sandbox.exec(
            ["python3", "-I", f"{CHECKERS}/stop_agent.py", self.ws.agent_user], timeout=60
        )
        if not r.ok:
            raise SandboxError(f"cannot stop the agent's processes: {(r.stdout + r.stderr)[-500:]}")

    async def before_leaf(self) -> None:
        self.leaves += 1
        if self.leaves > 1:
            await self.stop_agent()
            await self.fresh_workspace()


async def prepare(
    sandbox: Sandbox,
    tests: Path | None,
    workspace: Workspace,
    originals: Archive | None = None,
) -> None:
    """Lay out a checker sandbox: ``/agentenv`` (root's, 0700 for the hidden tests) with the
    checker programs and the hidden tests, ``originals`` (workdir files as they were before
    the agent) in :data:`ORIGINAL`, and the agent's workspace in the workdir. A few
    commands and archives, whatever the number of files."""
    await _run(sandbox, f"mkdir -p {ROOT} && {_clear(ROOT)}", timeout=60)
    await sandbox.upload_tar(_layout(tests), ROOT)
    await _run(
        sandbox,
        f"mkdir -p {OUT} {TESTS} {ORIGINAL} && chmod 0755 {ROOT} {CHECKERS}"
        f" && chmod 0700 {TESTS} {OUT} {ORIGINAL} && {_empty(workspace)}",
        timeout=60,
    )
    if originals is not None:
        await sandbox.upload_tar(originals, ORIGINAL)
    await sandbox.upload_tar(workspace.archive, workspace.workdir)


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


def _clear(*folders: str) -> str:
    """A command emptying ``folders`` (which may be mount points, so not removed)."""
    quoted = " ".join(shlex.quote(f) for f in folders)
    return f"find {quoted} -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +"


def _empty(ws: Workspace) -> str:
    """A command leaving an empty workdir owned by the agent, and empty /tmp and /dev/shm."""
    wd, user = shlex.quote(ws.workdir), shlex.quote(ws.agent_user)
    return (
        f"mkdir -p {wd} && {_clear(ws.workdir, '/tmp')} && "
        f"{{ [ ! -d /dev/shm ] || {_clear('/dev/shm')}; }} && chown {user} {wd} && chmod 0755 {wd}"
    )


def _layout(tests: Path | None) -> bytes:
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
    run = _Run(sandbox, workspace, tests)
    try:
        with _without_cases(tests, check) as sandbox_tests:  # expected outputs stay here
            keep = set(_kept(check))
            kept = originals(prepared, keep) if keep and prepared is not None else None
            await prepare(sandbox, sandbox_tests, workspace, kept)
        result, leaves = await _score(run, check)
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


async def _run(
    sandbox: Sandbox, cmd: str, *, timeout: float, cwd: str | None = None, check: bool = True
) -> Any:
    result = await sandbox.exec(cmd, timeout=timeout, cwd=cwd)
    if check and not result.ok:
        raise SandboxError(f"verifier setup failed: {cmd!r}: {result.stderr.strip()[-500:]}")
    return result


def _result(
    check: _Check, default: str, score: float, detail: str = "", *, error: bool = False
) -> CheckResult:
    return CheckResult(
        name=check.name or default,
        score=score,
        passed=score >= 1.0 and not error,
        detail=detail,
        error=error,
    )


def _kept(check: Check) -> list[str]:
    if isinstance(check, CompositeCheck):
        return [name for part in check.checks for name in _kept(part)]
    return check.kept() if isinstance(check, SweBenchCheck) else []


async def _score(run: _Run, check: Check) -> tuple[CheckResult, list[CheckResult]]:
    """The check's result and its leaf checks' results (itself, unless a composite; a
    swebench check's two lists)."""
    if isinstance(check, CompositeCheck):
        return await _composite(run, check)
    await run.before_leaf()
    if isinstance(check, SweBenchCheck):
        lists = await _swebench(run, check)
        passed = all(one.passed for one in lists)
        detail = "; ".join(f"{one.name} {one.detail}" for one in lists)
        return _result(check, "swebench", float(passed), detail), lists
    scorer = _SCORERS[type(check)]
    try:
        one = await scorer(run, check)
    except (SandboxError, OSError):
        raise
    except Exception as e:  # parsing what the sandbox produced: never an exception upward
        one = _result(check, check.kind, 0.0, f"unreadable output: {type(e).__name__}: {e}")
    return one, [one]


async def _command(run: _Run, check: CommandCheck) -> CheckResult:
    name = f"command {check.command[:60]}"
    ws = run.ws
    tail_chars = 4000 if check.user == "agent" else 1000  # a repo's test summary is at the end
    env = {"AS_AGENT": AS_AGENT, "AGENT_USER": ws.agent_user, "WORKDIR": ws.workdir}
    as_agent = check.user == "agent"
    if as_agent:
        env["HOME"] = "/tmp"
    r = await run.sandbox.exec(
        check.command,
        timeout=check.timeout_s,
        cwd=ws.workdir,
        env=env,
        user=ws.agent_user if as_agent else None,
    )
    await run.stop_agent()
    tail = (r.stdout + r.stderr).strip()[-tail_chars:]
    if r.timed_out:  # the agent's program hung under the check: a failure, not a crash
        return _result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    if r.exit_code in (126, 127):
        return _result(check, name, 0.0, f"could not run (exit {r.exit_code}): {tail}", error=True)
    one = _result(check, name, 1.0 if r.exit_code == 0 else 0.0, f"exit {r.exit_code}: {tail}")
    return one.model_copy(update={"exit_code": r.exit_code, "duration_s": r.duration_s})


async def _pytest(run: _Run, check: PytestCheck) -> CheckResult:
    name = f"pytest {' '.join(check.args)}"
    ws, box = run.ws, run.sandbox
    argv = ["python3", "-I", "-S", f"{CHECKERS}/run_pytest.py", ws.agent_user, ws.workdir, "--"]
    # pytest imports the agent's code: run_pytest.py (root) runs it in a child as the
    # agent's user, reading the tests for this check only, and takes one report from it;
    # what that code can still do in its own process is in docs/verification.md
    await _run(box, f"chmod -R a+rX {TESTS}", timeout=60)
    try:
        r = await box.exec(
            [*argv, *check.args],
            timeout=check.timeout_s,
            cwd=TESTS,
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HOME": "/tmp"},
            max_output=MAX_REPORT,
        )
    finally:
        await run.stop_agent()
        await _run(box, f"chmod -R go-rwx {TESTS}", timeout=60)
    if r.timed_out:  # the code under test hung: the agent failing
        return _result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    found, problem, crashed = _pytest_report(r)
    if found is None:
        return _result(check, name, 0.0, problem, error=crashed)
    outcomes, log = found["outcomes"], str(found.get("log", ""))[-1500:]
    if not outcomes:
        return _result(check, name, 0.0, f"no tests were collected: {log}", error=True)
    found_reasons = found.get("reasons")
    reasons = found_reasons if isinstance(found_reasons, dict) else {}
    excluded = sorted(
        str(k) for k, v in outcomes.items() if v == "skipped" and check.skipped == "exclude"
    )
    counted = {str(k): str(v) for k, v in outcomes.items() if str(k) not in excluded}
    if not counted:
        return _result(check, name, 0.0, f"every test was skipped: {', '.join(excluded[:10])}")
    # a skip raised while running is never a pass: the code under test can skip itself
    failed = sorted(k for k, v in counted.items() if v in ("failed", "error"))
    skipped = sorted(k for k, v in counted.items() if v not in ("passed", "failed", "error"))
    passed = len(counted) - len(failed) - len(skipped)
    score = passed / len(counted) if check.partial else float(passed == len(counted))
    detail = f"{passed}/{len(counted)} passed"
    if failed:
        detail += f"; failed: {', '.join(failed[:10])}"
    if skipped:
        shown = [f"{k} ({counted[k]}: {str(reasons.get(k, ''))[:100]})" for k in skipped[:10]]
        detail += f"; skipped, counted as not passed: {', '.join(shown)}"
    if excluded:
        detail += f"; {len(excluded)} skipped by the tests' markers, left out"
    return _result(check, name, score, detail)


SWEBENCH_PYTHON = "/opt/miniconda3/envs/testbed/bin/python"
"""Where SWE-bench's images keep the interpreter with the repo's dependencies."""
_PATCHED = f"{ROOT}/patched"
# run as the agent's user in the workdir: the files named go (the kept ones, and every
# conftest.py, found by root), and the kept ones come back as the test patch left them
_OVERLAY = (
    'set -euo pipefail; cd "$WORKDIR"; for f in "$@"; do rm -rf -- "$f"; done; '
    f'cp -R --preserve=mode,timestamps -- {_PATCHED}/. "$WORKDIR"/'
)


async def _swebench(run: _Run, check: SweBenchCheck) -> list[CheckResult]:
    ws, box = run.ws, run.sandbox
    started = time.monotonic()

    def lists(detail: str, *, error: bool = False) -> list[CheckResult]:
        return [_result(check, "FAIL_TO_PASS", 0.0, detail, error=error)]

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
    report, problem, crashed = _pytest_report(r)
    if report is None:
        return lists(problem, error=crashed)
    outcomes = report["outcomes"]
    took = time.monotonic() - started
    out = []
    for name, tests in (("FAIL_TO_PASS", check.fail_to_pass), ("PASS_TO_PASS", check.pass_to_pass)):
        seen = {test: str(outcomes.get(test, "missing")) for test in tests}
        bad = [f"{t} ({o})" for t, o in seen.items() if o != "passed"]
        detail = f"{len(tests) - len(bad)}/{len(tests)} passed"
        if bad:
            detail += f"; not passed: {', '.join(bad[:10])}" + (" ..." if len(bad) > 10 else "")
        one = _result(check, name, float(not bad), detail)
        out.append(one.model_copy(update={"tests": seen, "name": name, "duration_s": took}))
    return out


def _pytest_report(r: ExecResult) -> tuple[dict[str, Any] | None, str, bool]:
    """run_pytest's report from its last line of output, whose ``outcomes`` is a dict;
    else ``None``, why, and whether that is our runner crashing (a verifier error) rather
    than the code under test killing the run (``os._exit``, a signal) or forging, doubling
    or withholding the report (the agent failing, graded 0)."""
    lines = r.stdout_bytes.strip().splitlines()
    found = load_json(lines[-1]) if lines and not r.truncated else None
    if not isinstance(found, dict):
        return None, f"run_pytest crashed: {r.stderr[-500:]}", True
    if not isinstance(found.get("outcomes"), dict):
        log = str(found.get("log", ""))[-1500:]
        return None, f"the tests gave no report (exit {found.get('exit')}): {log}", False
    return found, "", False


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


async def _read_capped(sandbox: Sandbox, path: str, limit: int = MAX_REPORT) -> bytes | None:
    """A file's bytes, or ``None`` when it is missing, unreadable, not a regular file or
    larger than ``limit`` (nothing the agent made can make the host read without bound)."""
    r = await sandbox.exec(
        ["python3", "-I", f"{CHECKERS}/read_capped.py", path, str(limit)],
        timeout=60,
        max_output=limit + 1024,
    )
    if r.exit_code != 0 or r.truncated:
        return None
    return r.stdout_bytes


def _path(workdir: str, path: str) -> str:
    return path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"


async def _file(run: _Run, check: FileCheck) -> CheckResult:
    name = f"file {check.path}"
    data = await _read_capped(run.sandbox, _path(run.ws.workdir, check.path))
    if data is None:
        return _result(check, name, 0.0, "missing, unreadable, not a regular file or too big")
    if check.sha256 is not None and hashlib.sha256(data).hexdigest() != check.sha256.lower():
        return _result(check, name, 0.0, "sha256 differs")
    text = data.decode(errors="replace")
    if check.equals is not None:
        a, b = (text.strip(), check.equals.strip()) if check.strip else (text, check.equals)
        if a != b:
            return _result(check, name, 0.0, f"content differs: {text[:200]!r}")
    if check.regex is not None and re.search(check.regex, text, re.MULTILINE) is None:
        return _result(check, name, 0.0, f"no match for /{check.regex}/")
    return _result(check, name, 1.0, "ok")


def is_subset(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` contains ``expected``: dict keys recursively, lists element-wise
    (same length), anything else equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and is_subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual  # true is not 1
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(is_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def load_json(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON made in a sandbox: ``ValueError`` when it is not JSON or nests deeper
    than ``max_depth`` (checked before parsing, so no recursion limit is ever reached)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > max_depth:
                raise ValueError(f"nested deeper than {max_depth}")
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return json.loads(data)


async def _json(run: _Run, check: JsonCheck) -> CheckResult:
    name = f"json {check.path}"
    data = await _read_capped(run.sandbox, _path(run.ws.workdir, check.path))
    if data is None:
        return _result(check, name, 0.0, "missing, unreadable, not a regular file or too big")
    try:
        value = load_json(data)
    except ValueError as e:
        return _result(check, name, 0.0, f"not valid JSON: {str(e)[:200]}")
    given = check.model_fields_set  # `equals = null` is a value to compare, not "not given"
    same = is_subset(check.equals, value) and is_subset(value, check.equals)
    if "equals" in given and not same:
        return _result(check, name, 0.0, f"differs: {json.dumps(value)[:300]}")
    if "subset" in given and not is_subset(check.subset, value):
        return _result(
            check, name, 0.0, f"does not contain the expected: {json.dumps(value)[:300]}"
        )
    return _result(check, name, 1.0, "ok")


async def _image(run: _Run, check: ImageCheck) -> CheckResult:
    name = f"image {check.path}"
    argv = [
        "python3",
        "-I",
        f"{CHECKERS}/png_check.py",
        _path(run.ws.workdir, check.path),
        str(check.min_width),
        str(check.min_height),
    ]
    r = await run.sandbox.exec(argv, timeout=check.timeout_s, max_output=65536)
    if r.timed_out:
        return _result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    try:
        verdict = load_json(r.stdout_bytes)
    except ValueError:
        detail = f"png_check crashed (exit {r.exit_code}): {(r.stdout + r.stderr)[-500:]}"
        return _result(check, name, 0.0, detail, error=True)
    return _result(check, name, 1.0 if verdict.get("ok") else 0.0, str(verdict.get("detail", "")))


MAX_CASE_OUTPUT = 1 << 20  # bytes one case may produce (a result, a program's stdout)
MAX_HARNESS_OUTPUT = 2 * MAX_REPORT  # what the host reads of call_function.py's lines


def _load_cases(tests: Path | None, check: OutputsCheck) -> list[Case]:
    """The check's cases, read on the host; ``ValueError`` saying what is wrong with them
    (the loader refused such a file already, unless it changed since)."""
    if tests is None:
        raise ValueError("the task has no tests/ folder for the cases file")
    return read_cases(tests / check.cases, check, shown=check.cases)


def _target(check: OutputsCheck, case: Case) -> str:
    assert check.function is not None
    module = check.function.partition(":")[0]
    if case.function is None:
        return check.function
    return case.function if ":" in case.function else f"{module}:{case.function}"


def _with_inputs(value: Any, folder: str | None) -> Any:
    """``value`` with ``{inputs}`` in its strings replaced by the case's inputs folder."""
    if folder is None:
        return value
    if isinstance(value, str):
        return value.replace("{inputs}", folder)
    if isinstance(value, list):
        return [_with_inputs(v, folder) for v in value]
    if isinstance(value, dict):
        return {k: _with_inputs(v, folder) for k, v in value.items()}
    return value


def _same(expected: Any, actual: Any, abs_tol: float) -> bool:
    """Whether ``actual`` (parsed JSON, never an object the agent built) is ``expected``:
    booleans are not numbers, numbers equal within ``abs_tol`` (integers exactly)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        if isinstance(expected, int) and isinstance(actual, int):
            return expected == actual
        try:
            return math.isclose(expected, actual, rel_tol=0.0, abs_tol=abs_tol)
        except OverflowError:
            return False
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_same(e, a, abs_tol) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(_same(v, actual[k], abs_tol) for k, v in expected.items())
        )
    if expected is None:
        return actual is None
    return isinstance(expected, str) and isinstance(actual, str) and expected == actual


def _text_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _matches(check: OutputsCheck, expected: Any, actual: Any) -> bool:
    if check.compare == "json":
        return _same(expected, actual, check.abs_tol)
    if not isinstance(actual, str):
        return False
    if check.compare == "exact":
        return bool(expected == actual)
    if check.compare == "lines":
        return sorted(filter(None, _text_lines(expected))) == sorted(
            filter(None, _text_lines(actual))
        )
    return _text_lines(expected) == _text_lines(actual)


def _short(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text[:limit] + ("…" if len(text) > limit else "")


async def _write_inputs(run: _Run, cases: list[Case]) -> dict[int, str]:
    """Write the cases' input files, root's and read-only for the agent, one folder per
    case; returns those folders."""
    wanted = [i for i, case in enumerate(cases) if case.files]
    if not wanted:
        return {}
    base = f"{ROOT}/inputs-{run.leaves}"
    await _run(run.sandbox, f"rm -rf {base} && mkdir -p {base} && chmod 0755 {base}", timeout=60)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folders: set[str] = set()
        for i in wanted:
            for rel, text in sorted(cases[i].files.items()):
                path = Path(f"case-{i}", rel)
                for parent in reversed(path.parents[:-1]):
                    if str(parent) not in folders:
                        folders.add(str(parent))
                        info = tarfile.TarInfo(str(parent))
                        info.type, info.mode = tarfile.DIRTYPE, 0o755
                        tar.addfile(info)
                data = text.encode()
                info = tarfile.TarInfo(str(path))
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    await run.sandbox.upload_tar(buf.getvalue(), base)
    return {i: f"{base}/case-{i}" for i in wanted}


def _judge_call(check: OutputsCheck, case: Case, got: dict[str, Any]) -> tuple[bool, str]:
    """A function case's verdict from the harness's line (parsed JSON, checked here)."""
    if "error" in got:
        return False, f"error: {str(got['error'])[:200]}"
    if "raised" in got:
        names = got["raised"]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            return False, "unreadable result"
        message = str(got.get("message"))[:500]
        if case.raises is not None and case.raises in names:
            if case.match is not None and re.search(case.match, message) is None:
                return False, f"raised {names[0][:60]} but not /{case.match}/: {message[:150]}"
            return True, "ok"
        return False, f"raised {names[0][:60]}: {message[:150]}"
    if "value" not in got:
        return False, "unreadable result"
    if case.raises is not None:
        return False, f"returned {_short(got['value'])} instead of raising {case.raises}"
    if not _matches(check, case.expect, got["value"]):
        return False, f"wrong result {_short(got['value'])}"
    if case.expect_args is not None and not _same(case.expect_args, got.get("args"), 0.0):
        return False, f"the arguments after the call are {_short(got.get('args'))}"
    return True, "ok"


async def _call_functions(
    run: _Run, check: OutputsCheck, cases: list[Case], folders: dict[int, str]
) -> list[tuple[bool, str]]:
    """Call the agent's function on every case's inputs through ``call_function.py`` (as
    the agent's user, a fresh process per case) and judge its lines on the host."""
    ws = run.ws
    timeouts = [case.timeout_s or check.timeout_s for case in cases]
    request = {
        "max_result": MAX_CASE_OUTPUT,
        "total_timeout": check.total_timeout_s,
        "cases": [
            {
                "id": i,
                "target": _target(check, case),
                "args": _with_inputs(case.args, folders.get(i)),
                "kwargs": _with_inputs(case.kwargs, folders.get(i)),
                "timeout": timeouts[i],
                "keep_tuples": case.keep_tuples,
                "report_args": case.expect_args is not None,
            }
            for i, case in enumerate(cases)
        ],
    }
    r = await run.sandbox.exec(
        ["python3", "-I", f"{CHECKERS}/call_function.py", ws.workdir],
        timeout=min(sum(timeouts), check.total_timeout_s) + 2.0 * len(cases) + 30,
        cwd=ws.workdir,
        env={"HOME": "/tmp"},
        stdin=json.dumps(request).encode(),
        max_output=min(len(cases) * (MAX_CASE_OUTPUT + 4096), MAX_HARNESS_OUTPUT),
        user=ws.agent_user,
    )
    if r.exit_code in (126, 127):
        raise SandboxError(f"cannot run call_function.py: {(r.stdout + r.stderr)[-500:]}")
    if r.truncated:  # only the agent's code writing past the harness makes this much
        return [(False, "the harness's output was too large")] * len(cases)
    lines: dict[int, list[dict[str, Any]]] = {}
    for raw in r.stdout_bytes.split(b"\n"):
        try:
            line = load_json(raw) if raw.strip() else None
        except (ValueError, RecursionError):
            continue  # the agent's code wrote something of its own
        ident = line.get("id") if isinstance(line, dict) else None
        if type(ident) is int and 0 <= ident < len(cases):
            lines.setdefault(ident, []).append(line)  # type: ignore[arg-type]
    why = "timed out" if r.timed_out else f"exit {r.exit_code}"
    verdicts = []
    for i, case in enumerate(cases):
        found = lines.get(i, [])
        if not found:
            verdicts.append((False, f"no result (the harness: {why})"))
        elif len(found) > 1:
            verdicts.append((False, "more than one result line: output forged"))
        else:
            verdicts.append(_judge_call(check, case, found[0]))
    return verdicts


def _judge_run(check: OutputsCheck, case: Case, r: Any, timeout: float) -> tuple[bool, str]:
    """A program case's verdict from what the program did."""
    if r.timed_out:
        return False, f"timed out after {timeout:g} s"
    if r.truncated:
        return False, f"output larger than {MAX_CASE_OUTPUT} bytes"
    want = 0 if case.exit_code is None else case.exit_code
    if r.exit_code != want:
        return False, f"exit {r.exit_code}, not {want}: {r.stderr.strip()[-150:]!r}"
    if case.stderr_contains is not None and case.stderr_contains not in r.stderr:
        return False, f"stderr lacks {case.stderr_contains!r}: {r.stderr.strip()[-100:]!r}"
    if "expect" not in case.model_fields_set:
        return True, "ok"
    actual: Any = r.stdout
    if check.compare == "json":
        try:
            actual = load_json(r.stdout_bytes)
        except (ValueError, RecursionError):
            return False, f"stdout is not JSON: {_short(r.stdout)}"
    if not _matches(check, case.expect, actual):
        return False, f"wrong output {_short(r.stdout)}"
    return True, "ok"


async def _run_programs(
    run: _Run, check: OutputsCheck, cases: list[Case], folders: dict[int, str]
) -> list[tuple[bool, str]]:
    """Run the agent's program once per case, as the agent's user, in the workdir."""
    assert check.program is not None
    ws, verdicts = run.ws, []
    end = time.monotonic() + check.total_timeout_s
    for i, case in enumerate(cases):
        folder = folders.get(i)
        left = end - time.monotonic()
        if left <= 0:
            verdicts.append((False, f"not run: the {check.total_timeout_s:g} s ran out"))
            continue
        timeout = min(case.timeout_s or check.timeout_s, left)
        r = await run.sandbox.exec(
            [*check.program, *_with_inputs(case.args, folder)],
            timeout=timeout,
            cwd=ws.workdir,
            env={"HOME": "/tmp", **({"INPUTS": folder} if folder else {})},
            stdin=(case.stdin or "").encode(),
            max_output=MAX_CASE_OUTPUT,
            user=ws.agent_user,
        )
        if r.timed_out:
            await run.stop_agent()  # what it left running must not meet the next case
        verdicts.append(_judge_run(check, case, r, timeout))
    return verdicts


async def _outputs(run: _Run, check: OutputsCheck) -> CheckResult:
    name = f"outputs {check.cases}"
    started = time.monotonic()
    try:
        cases = _load_cases(run.tests, check)
    except ValueError as e:
        return _result(check, name, 0.0, str(e)[:1000], error=True)
    ws = run.ws
    try:
        folders = await _write_inputs(run, cases)
        if check.build is not None:
            built = await run.sandbox.exec(
                check.build,
                timeout=check.build_timeout_s,
                cwd=ws.workdir,
                env={"HOME": "/tmp"},
                user=ws.agent_user,
            )
            if not built.ok:
                how = "timed out" if built.timed_out else f"exit {built.exit_code}"
                tail = (built.stdout + built.stderr).strip()[-800:]
                return _result(check, name, 0.0, f"the build failed ({how}): {tail}")
        if check.program is not None:
            verdicts = await _run_programs(run, check, cases, folders)
        else:
            verdicts = await _call_functions(run, check, cases, folders)
    finally:
        await run.stop_agent()
    oks = [ok for ok, _ in verdicts]
    passed = sum(oks)
    score = _won(cases, oks) if check.partial else float(passed == len(cases))
    failed = [
        f"{case.name or f'case {i}'} ({why})"
        for i, (case, (ok, why)) in enumerate(zip(cases, verdicts, strict=True))
        if not ok
    ]
    detail = f"{passed}/{len(cases)} cases passed"
    if failed:
        detail += f"; failed: {'; '.join(failed[:10])}" + ("; …" if len(failed) > 10 else "")
    one = _result(check, name, score, detail)
    return one.model_copy(update={"duration_s": time.monotonic() - started})


def _won(cases: list[Case], passed: list[bool]) -> float:
    """The weighted fraction of cases passed, a case counting only when the cases it
    ``requires`` (every case of each name) passed too."""
    ok_name: dict[str | None, bool] = {}
    for case, ok in zip(cases, passed, strict=True):
        ok_name[case.name] = ok_name.get(case.name, True) and ok
    won = sum(
        case.weight
        for case, ok in zip(cases, passed, strict=True)
        if ok and all(ok_name[n] for n in case.requires)
    )
    return won / sum(case.weight for case in cases)


def leaf_checks(check: Check) -> list[Check]:
    """The checks a check is made of (itself, unless it is a composite), at any depth."""
    if isinstance(check, CompositeCheck):
        return [leaf for c in check.checks for leaf in leaf_checks(c)]
    return [check]


@contextlib.contextmanager
def _without_cases(tests: Path | None, check: Check) -> Iterator[Path | None]:
    """``tests`` as a sandbox may have it: without the cases files of outputs checks, whose
    expected values stay on the host (a copy, when there are any)."""
    hidden = {
        (tests / c.cases).resolve()
        for c in leaf_checks(check)
        if tests is not None and isinstance(c, OutputsCheck)
    }
    if tests is None or not hidden or not tests.is_dir():
        yield tests
        return

    def skip(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if (Path(folder) / n).resolve() in hidden]

    with scratch.folder("tests") as tmp:
        copy = Path(tmp) / "tests"
        shutil.copytree(tests, copy, symlinks=True, ignore=skip)
        yield copy


async def _composite(run: _Run, check: CompositeCheck) -> tuple[CheckResult, list[CheckResult]]:
    scored = [await _score(run, c) for c in check.checks]
    parts = [p for p, _ in scored]
    leaves = [leaf for _, sub in scored for leaf in sub]
    weights = [c.weight for c in check.checks]
    if check.mode == "all":
        score = 1.0 if all(p.passed for p in parts) else 0.0
    elif check.mode == "any":
        score = 1.0 if any(p.passed for p in parts) else 0.0
    else:
        total = sum(weights) or 1.0
        score = sum(w * p.score for w, p in zip(weights, parts, strict=True)) / total
    passed_n = sum(p.passed for p in parts)
    out = _result(check, f"{check.mode} of {len(parts)}", score, f"{passed_n}/{len(parts)} passed")
    return out, leaves


_SCORERS: dict[type, Callable[[_Run, Any], Awaitable[CheckResult]]] = {
    CommandCheck: _command,
    PytestCheck: _pytest,
    FileCheck: _file,
    JsonCheck: _json,
    ImageCheck: _image,
    OutputsCheck: _outputs,
}
