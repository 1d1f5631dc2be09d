"""The ``outputs`` check: the agent's function or program run on a cases file's inputs
in the sandbox, its outputs compared on the host with expected values that never enter it."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shutil
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from agentenv import scratch
from agentenv.cases import Case, read_cases
from agentenv.sandbox.errors import SandboxError
from agentenv.verify.base import (
    CHECKERS,
    MAX_REPORT,
    ROOT,
    CheckBase,
    Run,
    load_json,
    result,
    run_checked,
)
from agentenv.verify.kinds.composite import leaf_checks
from agentenv.verify.registry import leaf_scorer
from agentenv.verify.score import CheckResult

if TYPE_CHECKING:
    from agentenv.verify.kinds import Check


class OutputsCheck(CheckBase):
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


async def _write_inputs(run: Run, cases: list[Case]) -> dict[int, str]:
    """Write the cases' input files, root's and read-only for the agent, one folder per
    case; returns those folders."""
    wanted = [i for i, case in enumerate(cases) if case.files]
    if not wanted:
        return {}
    base = f"{ROOT}/inputs-{run.leaves}"
    await run_checked(
        run.sandbox, f"rm -rf {base} && mkdir -p {base} && chmod 0755 {base}", timeout=60
    )
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
    run: Run, check: OutputsCheck, cases: list[Case], folders: dict[int, str]
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
    # as root, each case's child dropping to the agent's user: the agent's code can then
    # neither stop the harness (holding the check until this timeout) nor outlive its case
    drop = run.stops()
    r = await run.sandbox.exec(
        ["python3", "-I", f"{CHECKERS}/call_function.py", ws.workdir]
        + ([ws.agent_user] if drop else []),
        timeout=min(sum(timeouts), check.total_timeout_s) + 2.0 * len(cases) + 30,
        cwd=ws.workdir,
        env={"HOME": "/tmp"},
        stdin=json.dumps(request).encode(),
        max_output=min(len(cases) * (MAX_CASE_OUTPUT + 4096), MAX_HARNESS_OUTPUT),
        user=None if drop else ws.agent_user,
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
    run: Run, check: OutputsCheck, cases: list[Case], folders: dict[int, str]
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


@leaf_scorer("outputs")
async def _outputs(run: Run, check: OutputsCheck) -> CheckResult:
    name = f"outputs {check.cases}"
    started = time.monotonic()
    try:
        cases = _load_cases(run.tests, check)
    except ValueError as e:
        return result(check, name, 0.0, str(e)[:1000], error=True)
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
                return result(check, name, 0.0, f"the build failed ({how}): {tail}")
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
    one = result(check, name, score, detail)
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


@contextlib.contextmanager
def without_cases(tests: Path | None, check: Check) -> Iterator[Path | None]:
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
