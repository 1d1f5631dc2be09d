"""Deterministic verifiers: turn a sandbox's final state into a reward in [0, 1].

A task's ``[verifier]`` table picks a kind:

- ``command``: a command (run in the workdir) passes on exit 0;
- ``pytest``: the task's hidden tests; JUnit XML → the fraction passed (``partial``) or all
  or nothing;
- ``file``: a file exists / equals a text / matches a regex / has a sha256;
- ``json``: a JSON file equals a value, or contains it as a subset;
- ``image``: a valid PNG, not blank, at least a given size;
- ``composite``: checks combined by ``all``, ``any`` or ``weighted``.

Only after the agent is done does the verifier prepare ``/agentenv`` in the sandbox: whatever
the agent put there (a planted reward file, fake tests) is removed, processes the agent left
running are stopped, then the task's hidden ``tests/`` and the checker programs of
``verifiers/`` are copied in. A checker that cannot run (missing, timed out, crashed)
gives a :class:`Score` with ``error`` set, which is not the agent failing.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
import xml.etree.ElementTree as ET
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


class CheckResult(BaseModel):
    """One check's outcome. ``error`` means the check could not be made (not a failure)."""

    name: str
    score: float
    passed: bool
    detail: str = ""
    error: bool = False


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
    ``/agentenv/tests``). Exit 126/127 (not runnable) is a verifier error, so a check script
    that runs the agent's programs should exit 1 when those are missing; a timeout is a
    failure (the agent's program hung)."""

    kind: Literal["command"]
    command: str
    timeout_s: float = Field(300, gt=0)


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


async def prepare(sandbox: Sandbox, tests: Path | None, workdir: str = "/workspace") -> None:
    """Clear ``/agentenv`` (planted reward files, fake tests), stop every process the agent
    left (tagged or not), remove symlinks in the workdir that lead into ``/agentenv``, and
    copy in the checker programs and the hidden tests."""
    # Our checkers go in first, under the wiped root: nothing the agent put there is run.
    await _run(sandbox, f"rm -rf {ROOT} && mkdir -p {OUT} {TESTS}", timeout=60)
    await sandbox.upload(CHECKERS_DIR, CHECKERS)
    await _run(sandbox, f"python3 -I {CHECKERS}/stop_agent.py {workdir}", timeout=30, check=False)
    await _run(sandbox, f"rm -rf {OUT} && mkdir -p {OUT}", timeout=60)
    if tests is not None and tests.is_dir():
        await sandbox.upload(tests, TESTS)


async def verify(
    sandbox: Sandbox, check: Check, *, workdir: str = "/workspace", tests: Path | None = None
) -> Score:
    """Prepare the sandbox (see :func:`prepare`) and score ``check`` against it."""
    started = time.monotonic()
    try:
        await prepare(sandbox, tests, workdir)
        result, leaves = await _score(sandbox, check, workdir)
    except SandboxUnavailable:
        raise  # the container died: an infrastructure failure, retried like any other
    except (SandboxError, OSError) as e:
        # the sandbox refused: no valid reward
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


async def _score(
    sandbox: Sandbox, check: Check, workdir: str
) -> tuple[CheckResult, list[CheckResult]]:
    """The check's result and its leaf checks' results (itself, unless a composite)."""
    if isinstance(check, CompositeCheck):
        return await _composite(sandbox, check, workdir)
    if isinstance(check, CommandCheck):
        one = await _command(sandbox, check, workdir)
    elif isinstance(check, PytestCheck):
        one = await _pytest(sandbox, check, workdir)
    elif isinstance(check, FileCheck):
        one = await _file(sandbox, check, workdir)
    elif isinstance(check, JsonCheck):
        one = await _json(sandbox, check, workdir)
    else:
        one = await _image(sandbox, check, workdir)
    return one, [one]


async def _command(sandbox: Sandbox, check: CommandCheck, workdir: str) -> CheckResult:
    name = f"command {check.command[:60]}"
    r = await sandbox.exec(check.command, timeout=check.timeout_s, cwd=workdir)
    tail = (r.stdout + r.stderr).strip()[-1000:]
    if r.timed_out:  # the agent's program hung under the check: a failure, not a crash
        return _result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    if r.exit_code in (126, 127):
        return _result(check, name, 0.0, f"could not run (exit {r.exit_code}): {tail}", error=True)
    return _result(check, name, 1.0 if r.exit_code == 0 else 0.0, f"exit {r.exit_code}: {tail}")


async def _pytest(sandbox: Sandbox, check: PytestCheck, workdir: str) -> CheckResult:
    name = f"pytest {' '.join(check.args)}"
    junit = f"{OUT}/junit.xml"
    argv = [
        "python3",
        "-I",
        f"{CHECKERS}/run_pytest.py",
        workdir,
        junit,
        "--",
        *check.args,
    ]
    r = await sandbox.exec(
        shlex.join(argv),
        timeout=check.timeout_s,
        cwd=TESTS,
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},  # no plugin the agent installed
    )
    tail = (r.stdout + r.stderr).strip()[-1500:]
    if r.timed_out:  # the code under test hung: the agent failing
        return _result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
    try:
        xml = await sandbox.read_file(junit)
    except OSError:
        # pytest and our runner are ours; the code under test killed the run (os._exit, a
        # signal): the agent failing, graded 0
        return _result(check, name, 0.0, f"the tests did not finish (exit {r.exit_code}): {tail}")
    total, failed, names = _junit(xml)
    if total == 0:
        return _result(check, name, 0.0, "no tests were collected", error=True)
    passed = total - failed
    score = passed / total if check.partial else float(failed == 0)
    detail = f"{passed}/{total} passed" + (f"; failed: {', '.join(names[:10])}" if names else "")
    return _result(check, name, score, detail)


def _junit(xml: bytes) -> tuple[int, int, list[str]]:
    """(tests, failed, errored or skipped, names of those) from a JUnit XML report."""
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


async def _read_text(sandbox: Sandbox, path: str) -> str | None:
    try:
        return (await sandbox.read_file(path)).decode()
    except (OSError, UnicodeDecodeError):
        return None


def _path(workdir: str, path: str) -> str:
    return path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"


async def _file(sandbox: Sandbox, check: FileCheck, workdir: str) -> CheckResult:
    name = f"file {check.path}"
    try:
        data = await sandbox.read_file(_path(workdir, check.path))
    except OSError as e:
        return _result(check, name, 0.0, f"missing or unreadable: {e}")
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


async def _json(sandbox: Sandbox, check: JsonCheck, workdir: str) -> CheckResult:
    name = f"json {check.path}"
    text = await _read_text(sandbox, _path(workdir, check.path))
    if text is None:
        return _result(check, name, 0.0, "missing or unreadable")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return _result(check, name, 0.0, f"not valid JSON: {e}")
    given = check.model_fields_set  # `equals = null` is a value to compare, not "not given"
    same = is_subset(check.equals, value) and is_subset(value, check.equals)
    if "equals" in given and not same:
        return _result(check, name, 0.0, f"differs: {json.dumps(value)[:300]}")
    if "subset" in given and not is_subset(check.subset, value):
        return _result(
            check, name, 0.0, f"does not contain the expected: {json.dumps(value)[:300]}"
        )
    return _result(check, name, 1.0, "ok")


async def _image(sandbox: Sandbox, check: ImageCheck, workdir: str) -> CheckResult:
    name = f"image {check.path}"
    argv = [
        "python3",
        "-I",
        f"{CHECKERS}/png_check.py",
        _path(workdir, check.path),
        str(check.min_width),
        str(check.min_height),
    ]
    r = await sandbox.exec(shlex.join(argv), timeout=check.timeout_s)
    try:
        verdict = json.loads(r.stdout)
    except json.JSONDecodeError:
        detail = f"png_check crashed (exit {r.exit_code}): {(r.stdout + r.stderr)[-500:]}"
        return _result(check, name, 0.0, detail, error=True)
    return _result(check, name, 1.0 if verdict.get("ok") else 0.0, str(verdict.get("detail", "")))


async def _composite(
    sandbox: Sandbox, check: CompositeCheck, workdir: str
) -> tuple[CheckResult, list[CheckResult]]:
    scored = [await _score(sandbox, c, workdir) for c in check.checks]
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
