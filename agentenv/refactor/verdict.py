"""What a repo's tests say about a change: one run read from its checker sandbox's score
(exit code, pytest-style counts, why it went red), and the rules that keep a green run from
verifying a change that only silenced the tests (fewer tests passing than before; the files
that decide the verdict, named in the report).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from agentenv.verify import Score

TEST_TIMEOUT_S = 900.0


class TestRun(BaseModel):
    """One run of a repo's tests."""

    command: str
    exit_code: int
    passed: int | None = None  # counts when the output says (pytest-style summaries)
    failed: int | None = None
    duration_s: float = 0.0
    tail: str = ""
    timed_out_s: float | None = None  # set when the run was killed at its timeout

    @property
    def green(self) -> bool:
        """Whether the tests passed."""
        return self.exit_code == 0 and self.timed_out_s is None

    @property
    def verdict(self) -> str:
        """``green``, ``red, exit N`` or ``timed out after N s``, with counts when known."""
        if self.timed_out_s is not None:
            return f"timed out after {self.timed_out_s:g} s"
        counts = f" ({self.passed} passed, {self.failed} failed)" if self.passed is not None else ""
        return ("green" if self.green else f"red, exit {self.exit_code}") + counts

    def why_red(self, lines: int = 3) -> str:
        """The first lines that say why the run failed ("" when it passed): pytest's
        ``FAILED``/``ERROR`` lines, else its ``E`` lines, else lines naming an error, else the
        last lines of the output."""
        if self.green:
            return ""
        if self.timed_out_s is not None:
            return f"timed out after {self.timed_out_s:g} s"
        text = [ln.rstrip() for ln in self.tail.splitlines() if ln.strip()]
        for pick in (
            lambda ln: ln.startswith(("FAILED ", "ERROR ")),
            lambda ln: re.match(r"E\s+\S", ln) is not None,
            lambda ln: re.search(r"\b(\w*Error|error|FAIL\w*|Traceback|panicked)\b", ln),
        ):
            found = [ln for ln in text if pick(ln)]
            if found:
                return "\n".join(ln[:300] for ln in found[:lines])
        return "\n".join(ln[:300] for ln in text[-lines:])


_COUNT = re.compile(r"(\d+) (passed|failed|errors?)\b")


def parse_counts(output: str) -> tuple[int | None, int | None]:
    """Passed and failed counts from a pytest-style summary line, if there is one."""
    found: dict[str, int] = {}
    for number, word in _COUNT.findall(output):
        key = "failed" if word.startswith("error") else word
        found[key] = found.get(key, 0) + int(number)
    if not found:
        return None, None
    return found.get("passed", 0), found.get("failed", 0)


def test_run(command: str, score: Score, timeout_s: float | None = None) -> TestRun:
    """A repo's test run from the checker sandbox's score of its test command."""
    check = score.checks[0] if score.checks else None
    detail = check.detail if check else (score.error or "")
    exit_code = check.exit_code if check and check.exit_code is not None else None
    timed_out = exit_code is None and detail.startswith("timed out")
    if exit_code is None:  # timed out, or could not run at all
        exit_code = 124 if timed_out else 127
    passed, failed = parse_counts(detail[-4000:])
    return TestRun(
        command=command,
        exit_code=exit_code,
        passed=passed,
        failed=failed,
        duration_s=check.duration_s if check else 0.0,
        tail=detail[-2000:],
        timed_out_s=(timeout_s or TEST_TIMEOUT_S) if timed_out else None,
    )


_DECIDING = re.compile(
    r"(^|/)(tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$|pytest\.ini$|tox\.ini$"
    r"|noxfile\.py$|setup\.cfg$|pyproject\.toml$|Makefile$|package\.json$)"
)


def verdict_files(paths: list[str]) -> list[str]:
    """The paths among ``paths`` that can change what the tests say: test files and
    folders, conftest, pytest/tox/nox settings, the Makefile, package.json."""
    return [p for p in paths if p and _DECIDING.search(p)]


def lost_tests(before: TestRun | None, after: TestRun) -> str | None:
    """Why a green run ``after`` the change is not verified, when it passed fewer tests than
    the run ``before`` it (tests deleted, skipped or deselected by the change), else ``None``.
    A change that leaves the counts unreadable where they were readable lost them too."""
    if not after.green or before is None or before.passed is None:
        return None
    now = after.passed if after.passed is not None else 0
    if now >= before.passed:
        return None
    return (
        f"{before.passed} tests passed before the change and {now} after: a change that "
        "loses passing tests (deleted, skipped or deselected) is not verified"
    )
