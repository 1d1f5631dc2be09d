"""The ``pytest`` check: the task's hidden tests, run with pytest; the agent's code imported
by them (in-process) or called from them in processes of its own (``isolation = "process"``)."""

from __future__ import annotations

from typing import Any, Literal

import anyio
from pydantic import Field

from agentenv.sandbox.protocol import ExecResult
from agentenv.verify.base import (
    CHECKERS,
    MAX_REPORT,
    TESTS,
    CheckBase,
    Run,
    load_json,
    result,
    run_checked,
)
from agentenv.verify.registry import leaf_scorer
from agentenv.verify.score import CheckResult
from agentenv.verify.suspicious import OnSuspicious, apply_flags, scan


class PytestCheck(CheckBase):
    """Runs pytest on the hidden tests; the reward is the fraction passed, or 0/1 unless
    ``partial``. ``args`` go to pytest as given (default ``["."]``), read from the tests
    folder: paths and node ids in them are relative to it, as in ``["test_api.py",
    "--deselect", "test_api.py::test_slow", "-k", "not network"]``.

    ``isolation`` is where the agent's code runs:

    - ``"in-process"`` (the default): the tests import the agent's code (``import calc``;
      the workdir is on ``sys.path``) and pytest runs as the agent's user. That code then
      shares the process that writes the report, so the verdict cannot be protected, only
      checked: what does not add up is flagged in ``suspicious`` (see docs/verification.md)
      and ``on_suspicious`` says what a flag does: ``"zero"`` (the default) scores the check
      0 with the reasons, ``"review"`` keeps the score and the flags for a person.
    - ``"process"``: pytest runs as root and never imports the agent's code; the tests reach
      it only through the ``agent`` fixture, which calls it in a process of the agent's user
      and hands back plain values (JSON data), so pass/fail is decided where the agent's code
      cannot reach and its ``__eq__`` never runs. The hidden tests stay unreadable to it::

          import pytest

          def test_add(agent):
              assert agent.call("calc:add", 1, 2) == 3

          def test_rejects_text(agent):
              with pytest.raises(ValueError):
                  agent.call("calc:parse", "x")

      ``agent.call_with(target, args, kwargs, timeout=S)`` sets a call's timeout (10 s
      otherwise); a call that hangs, dies or returns something other than plain data raises
      ``AgentCallError`` (see ``verifiers/agent_proxy.py``).

    It is not the default because tests written as ``import calc`` (every pytest check
    written so far, and what SWE-bench-style tests are) cannot run that way; prefer it (or
    the ``outputs`` kind) for new tasks."""

    kind: Literal["pytest"]
    args: list[str] = Field(["."])
    partial: bool = False
    # "fail": a skipped test did not pass. "exclude": a test skipped by a skip/skipif marker
    # of the hidden tests is left out of the count; a skip raised while it ran (pytest.skip(),
    # importorskip: the agent's code can raise those) still counts as not passed
    skipped: Literal["fail", "exclude"] = "fail"
    timeout_s: float = Field(300, gt=0)
    isolation: Literal["in-process", "process"] = "in-process"
    # zero: a safe default, since a flag means the report may be the agent's own words and
    # an honest solution raises none; review: for tests whose own code trips a heuristic
    on_suspicious: OnSuspicious = "zero"


@leaf_scorer("pytest")
async def _pytest(run: Run, check: PytestCheck) -> CheckResult:
    name = f"pytest {' '.join(check.args)}"
    static: list[str] = []
    if check.isolation == "in-process":  # read on the host, from the tar: not by its code
        static = await anyio.to_thread.run_sync(scan, run.ws.archive, run.prepared)
    r = await _run(run, check)
    if r.timed_out:  # the code under test hung: the agent failing
        hung = result(check, name, 0.0, f"timed out after {check.timeout_s:g} s")
        return apply_flags(hung, static, check.on_suspicious)
    found, problem, crashed = pytest_report(r)
    if found is None:
        failed = result(check, name, 0.0, problem, error=crashed)
        return apply_flags(failed, static, check.on_suspicious)
    said = found.get("suspicious")
    flags = [str(s) for s in said] if isinstance(said, list) else []
    return apply_flags(_scored(check, name, found), flags + static, check.on_suspicious)


async def _run(run: Run, check: PytestCheck) -> ExecResult:
    ws, box = run.ws, run.sandbox
    mode = ["--process"] if check.isolation == "process" else []
    argv = ["python3", "-I", "-S", f"{CHECKERS}/run_pytest.py", *mode, ws.agent_user, ws.workdir]
    # in-process, pytest imports the agent's code: run_pytest.py (root) runs it in a child as
    # the agent's user, reading the tests for this check only, and takes one report from it;
    # what that code can still do in its own process is in docs/verification.md. In a
    # separate process, the tests stay root's: nothing of the agent's reads them
    if check.isolation == "in-process":
        await run_checked(box, f"chmod -R a+rX {TESTS}", timeout=60)
    try:
        return await box.exec(
            [*argv, "--", *check.args],
            timeout=check.timeout_s,
            cwd=TESTS,
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HOME": "/tmp"},
            max_output=MAX_REPORT,
        )
    finally:
        await run.stop_agent()
        await run_checked(box, f"chmod -R go-rwx {TESTS}", timeout=60)


def _scored(check: PytestCheck, name: str, found: dict[str, Any]) -> CheckResult:
    """The check's result from run_pytest's report (whose outcomes are a dict)."""
    outcomes, log = found["outcomes"], str(found.get("log", ""))[-1500:]
    if not outcomes:
        return result(check, name, 0.0, f"no tests were collected: {log}", error=True)
    found_reasons = found.get("reasons")
    reasons = found_reasons if isinstance(found_reasons, dict) else {}
    excluded = sorted(
        str(k) for k, v in outcomes.items() if v == "skipped" and check.skipped == "exclude"
    )
    counted = {str(k): str(v) for k, v in outcomes.items() if str(k) not in excluded}
    if not counted:
        return result(check, name, 0.0, f"every test was skipped: {', '.join(excluded[:10])}")
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
    return result(check, name, score, detail)


def pytest_report(r: ExecResult) -> tuple[dict[str, Any] | None, str, bool]:
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
