"""Deterministic verifiers: turn a sandbox's final state into a reward in [0, 1].

A task's ``[verifier]`` table picks a kind:

- ``command``: a command (run in the workdir) passes on exit 0;
- ``pytest``: the task's hidden tests; JUnit XML → the fraction passed (``partial``) or all
  or nothing;
- ``file``: a file exists / equals a text / matches a regex / has a sha256;
- ``json``: a JSON file equals a value, or contains it as a subset;
- ``image``: a valid PNG, not blank, at least a given size;
- ``composite``: checks combined by ``all``, ``any`` or ``weighted``.

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

import hashlib
import json
import re
import shlex
import time
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentenv.sandbox.errors import SandboxError, SandboxUnavailable
from agentenv.sandbox.protocol import Sandbox

ROOT = "/agentenv"  # hidden tests, checkers and their output; never visible during the episode
TESTS = f"{ROOT}/tests"
CHECKERS = f"{ROOT}/verifiers"
OUT = f"{ROOT}/out"
CHECKERS_DIR = Path(__file__).resolve().parent.parent / "verifiers"
AGENT_USER = "1000:1000"
"""The agent's user (``uid:gid``) unless a task asks for root."""
AS_AGENT = f"python3 -I {CHECKERS}/as_agent.py"
"""How a check script runs one of the agent's programs: as the agent's user, no privileges."""
CHECKER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
"""What the checker sandbox's root may do: lay out files, and drop to the agent's user."""
MAX_REPORT = 8 << 20  # bytes of a report (JUnit, JSON, a file) the host will parse
MAX_DEPTH = 64  # nesting a JSON value may have


class CheckResult(BaseModel):
    """One check's outcome. ``error`` means the check could not be made (not a failure)."""

    name: str
    score: float
    passed: bool
    detail: str = ""
    error: bool = False
    exit_code: int | None = None  # a command check's, or pytest's
    duration_s: float = 0.0


class Score(BaseModel):
    """What a verifier gave: reward in [0, 1], passed, the checks, and ``error`` when the
    verifier itself failed (then the reward is not valid)."""

    reward: float
    passed: bool
    checks: list[CheckResult] = []
    error: str | None = None
    duration_s: float = 0.0


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
    """Runs pytest on the hidden tests (``args``, relative to ``/agentenv/tests``) with the
    workdir importable; the reward is the fraction passed, or 0/1 unless ``partial``."""

    kind: Literal["pytest"]
    args: list[str] = ["."]
    partial: bool = False
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


class CompositeCheck(_Check):
    """Checks combined: ``all`` (1 only if every one passes), ``any``, or ``weighted`` (the
    weighted mean of their scores: partial credit)."""

    kind: Literal["composite"]
    mode: Literal["all", "any", "weighted"] = "all"
    checks: list[Check]


Check = Annotated[
    CommandCheck | PytestCheck | FileCheck | JsonCheck | ImageCheck | CompositeCheck,
    Field(discriminator="kind"),
]
CompositeCheck.model_rebuild()


class Workspace(BaseModel):
    """What a checker sandbox verifies: the agent's final workdir as a tar archive whose
    entries are relative to the workdir (made safe by the episode runner), and the user the
    agent ran as."""

    archive: bytes
    workdir: str = "/workspace"
    agent_user: str = AGENT_USER


class _Run:
    """One verification in a checker sandbox: lays the workspace down before each leaf
    check (so no check sees what an earlier one's agent code left) and stops the agent's
    processes after each."""

    def __init__(self, sandbox: Sandbox, workspace: Workspace):
        self.sandbox = sandbox
        self.ws = workspace
        self.leaves = 0

    async def fresh_workspace(self) -> None:
        wd, user = shlex.quote(self.ws.workdir), shlex.quote(self.ws.agent_user)
        await _run(
            self.sandbox,
            f"rm -rf {wd} && mkdir -p {wd} && chown {user} {wd} && chmod 0755 {wd}",
            timeout=120,
        )
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


async def prepare(sandbox: Sandbox, tests: Path | None, workspace: Workspace) -> None:
    """Lay out a checker sandbox: ``/agentenv`` (root's, 0700 for the hidden tests) with the
    checker programs and the hidden tests, and the agent's workspace in the workdir."""
    await _run(
        sandbox,
        f"rm -rf {ROOT} && mkdir -p {OUT} {TESTS} {CHECKERS} && chmod 0755 {ROOT} {CHECKERS}"
        f" && chmod 0700 {TESTS} {OUT}",
        timeout=60,
    )
    await sandbox.upload(CHECKERS_DIR, CHECKERS)
    if tests is not None and tests.is_dir():
        await sandbox.upload(tests, TESTS)
    await _Run(sandbox, workspace).fresh_workspace()


async def verify(
    sandbox: Sandbox, check: Check, workspace: Workspace, *, tests: Path | None = None
) -> Score:
    """Score ``check`` against ``workspace`` in ``sandbox``, a checker sandbox: a new one,
    made from the task's prepared state, whose root may switch users (:data:`CHECKER_CAPS`).
    Raises :class:`SandboxUnavailable` if the sandbox dies; any other failure to check is
    ``Score.error``."""
    started = time.monotonic()
    run = _Run(sandbox, workspace)
    try:
        await prepare(sandbox, tests, workspace)
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


async def _score(run: _Run, check: Check) -> tuple[CheckResult, list[CheckResult]]:
    """The check's result and its leaf checks' results (itself, unless a composite)."""
    if isinstance(check, CompositeCheck):
        return await _composite(run, check)
    await run.before_leaf()
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
    out = f"{OUT}/pytest-{run.leaves}"
    junit = f"{out}/junit.xml"
    argv = ["python3", "-I", f"{CHECKERS}/run_pytest.py", ws.workdir, junit, "--", *check.args]
    # pytest imports the agent's code, so it runs as the agent's user, reading the tests
    # for this check only; what that code can still do is in docs/verification.md
    user = shlex.quote(ws.agent_user)
    await _run(
        box,
        f"mkdir -p {out} && chown {user} {out} && chmod 0711 {OUT} && chmod -R a+rX {TESTS}",
        timeout=60,
    )
    try:
        r = await box.exec(
            shlex.join(argv),
            timeout=check.timeout_s,
            cwd=TESTS,
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HOME": "/tmp"},
            user=ws.agent_user,
        )
    finally:
        await run.stop_agent()
        await _run(box, f"chmod -R go-rwx {TESTS} && chmod 0700 {OUT}", timeout=60)
    tail = (r.stdout + r.stderr).strip()[-1500:]
    if r.timed_out:  # the code under test hung: the agent failing
        return _result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    xml = await _read_capped(box, junit)
    if xml is None:
        # pytest and our runner are ours; the code under test killed the run (os._exit, a
        # signal) or left a report too big to read: the agent failing, graded 0
        return _result(check, name, 0.0, f"the tests did not finish (exit {r.exit_code}): {tail}")
    total, failed, names = _junit(xml)
    if total == 0:
        return _result(check, name, 0.0, "no tests were collected", error=True)
    passed = total - failed
    score = passed / total if check.partial else float(failed == 0)
    detail = f"{passed}/{total} passed" + (f"; failed: {', '.join(names[:10])}" if names else "")
    return _result(check, name, score, detail)


def _junit(xml: bytes) -> tuple[int, int, list[str]]:
    """(tests, failed, names of those failed, errored or skipped) from a JUnit XML report;
    raises on a report that is not one (the caller scores that 0)."""
    root = ET.fromstring(xml)
    total, failed, names = 0, 0, []
    for case in root.iter("testcase"):
        total += 1
        # a skipped test did not pass: the code under test can skip itself
        if any(child.tag in ("failure", "error", "skipped") for child in case):
            failed += 1
            names.append(f"{case.get('classname', '')}.{case.get('name', '')}".strip("."))
    # collection errors appear as suite-level errors without test cases
    for suite in root.iter("testsuite"):
        extra = int(suite.get("errors", "0")) - sum(
            1 for c in suite.iter("testcase") if any(x.tag == "error" for x in c)
        )
        if extra > 0:
            total += extra
            failed += extra
            names.append("collection error")
    return total, failed, names


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
}
