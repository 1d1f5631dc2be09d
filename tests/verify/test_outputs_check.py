"""The ``outputs`` check through the real episode and verifier, in real sandboxes: the agent's
function or program only produces outputs (run as the agent's user), the host compares them
with expected values that never enter a sandbox. Both modes pass and fail, partial credit,
``raises``; a hostile agent (an ``__eq__`` that is always true, forged harness lines, a
hunt for the cases file, a nesting bomb, 50 MB of output, a hang) scores 0 on those cases
and never turns the check into an exception; a cases file that goes missing or bad after the
task was loaded (loading refuses one) is a verifier error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.agent.policies import oracle
from agentenv.runner.episode import run_task
from agentenv.tasks import Task, load_task
from agentenv.verify import Score

pytestmark = pytest.mark.anyio


def _toml(table: dict[str, Any]) -> str:
    lines = []
    for key, value in table.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            continue  # composite parts: written as [[verifier.checks]] below
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines)


def make_task(
    folder: Path,
    verifier: dict[str, Any],
    cases: list[dict[str, Any]] | None,
    tests: dict[str, str] | None = None,
) -> Task:
    """A task folder: ``verifier`` as its [verifier] table, ``cases`` as tests/cases.json
    (none when ``None``) and other hidden ``tests`` files."""
    (folder / "tests").mkdir(parents=True)
    if cases is not None:
        (folder / "tests" / "cases.json").write_text(json.dumps(cases))
    for name, text in (tests or {}).items():
        (folder / "tests" / name).write_text(text)
    toml = 'description = "outputs check test"\n\n[limits]\nmax_turns = 3\n\n[verifier]\n'
    toml += _toml(verifier) + "\n"
    for part in verifier.get("checks", []):
        toml += f"\n[[verifier.checks]]\n{_toml(part)}\n"
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text("Write the code.\n")
    return load_task(folder)


async def score(task: Task, script: str) -> Score:
    """Run ``script`` as the agent's only command, then the task's verifier."""
    traj, _ = await run_task(task, oracle(script, timeout_s=120))
    assert traj.score is not None
    return traj.score


def write(path: str, text: str) -> str:
    """A shell snippet writing ``text`` to ``path`` in the workdir."""
    return f"cat > {path} <<'AGENTENV_EOF'\n{text}\nAGENTENV_EOF\n"


def detail(result: Score) -> str:
    return " | ".join(c.detail for c in result.checks)


# -- function mode --------------------------------------------------------------------------

CALC_CASES = [
    {"name": "add", "args": [2, 3], "expect": 5},
    {"name": "add floats", "args": [0.1, 0.2], "expect": 0.3},
    {"name": "add kwargs", "args": [], "kwargs": {"a": "x", "b": "y"}, "expect": "xy"},
    {"name": "div", "function": "div", "args": [7, 2], "expect": 3.5},
    {"name": "div by zero", "function": "div", "args": [1, 0], "raises": "ZeroDivisionError"},
    {"name": "pair", "function": "pair", "args": [1, 2], "expect": [1, 2]},
    {
        "name": "pair is a tuple",
        "function": "pair",
        "args": [1, 2],
        "keep_tuples": True,
        "expect": {"$tuple": [1, 2]},
    },
    {
        "name": "sorted copy",
        "function": "sorted_copy",
        "args": [[3, 1, 2]],
        "expect": [1, 2, 3],
        "expect_args": [[3, 1, 2]],
    },
    {"name": "is_even", "function": "is_even", "args": [4], "expect": True},
    {"name": "is_even odd", "function": "is_even", "args": [3], "expect": False},
]
CALC = """
def add(a, b):
    return a + b

def div(a, b):
    return a / b

def pair(a, b):
    return (a, b)

def sorted_copy(items):
    return sorted(items)

def is_even(n):
    return n % 2 == 0
"""
# wrong: pair gives a list, sorted_copy sorts in place, is_even answers 1/0, div floors
CALC_WRONG = """
def add(a, b):
    return a + b

def div(a, b):
    return a // b

def pair(a, b):
    return [a, b]

def sorted_copy(items):
    items.sort()
    return items

def is_even(n):
    return 1 if n % 2 == 0 else 0
"""


async def test_function_mode_passes_fails_and_gives_partial_credit(tmp_path: Path) -> None:
    verifier = {"kind": "outputs", "cases": "cases.json", "function": "calc:add", "partial": True}
    task = make_task(tmp_path / "partial", verifier, CALC_CASES)
    good = await score(task, write("calc.py", CALC))
    assert good.error is None and good.reward == 1.0 and good.passed, detail(good)
    assert "10/10 cases passed" in good.checks[0].detail

    bad = await score(task, write("calc.py", CALC_WRONG))
    assert bad.error is None, bad.error
    # add ×3, div by zero (// raises it too), pair as a list pass; 5 of 10
    assert bad.reward == pytest.approx(0.5), detail(bad)
    text = bad.checks[0].detail
    for name in ("div (wrong", "pair is a tuple", "sorted copy (the arguments", "is_even (wrong"):
        assert name in text

    strict = make_task(tmp_path / "strict", {**verifier, "partial": False}, CALC_CASES)
    assert (await score(strict, write("calc.py", CALC_WRONG))).reward == 0.0

    missing = await score(task, "echo nothing to see")  # no calc.py at all
    assert missing.error is None and missing.reward == 0.0
    assert "cannot load calc:add" in missing.checks[0].detail


async def test_raises_wants_that_exception_or_a_subclass(tmp_path: Path) -> None:
    cases = [
        {"name": "negative", "args": [-1], "raises": "ValueError"},
        {"name": "text", "args": ["1"], "raises": "TypeError"},
        {"name": "ok", "args": [4], "expect": 2},
    ]
    verifier = {"kind": "outputs", "cases": "cases.json", "function": "roots:root", "partial": True}
    task = make_task(tmp_path, verifier, cases)
    subclass = """
class RootError(ValueError):
    pass

def root(x):
    if not isinstance(x, int):
        raise TypeError("an int, please")
    if x < 0:
        raise RootError("negative")
    return int(x ** 0.5)
"""
    assert (await score(task, write("roots.py", subclass))).reward == 1.0
    # returns instead of raising, and raises the wrong kind
    sloppy = """
def root(x):
    x = int(x)
    if x < 0:
        raise TypeError("negative")
    return int(x ** 0.5)
"""
    result = await score(task, write("roots.py", sloppy))
    assert result.reward == pytest.approx(1 / 3), detail(result)
    assert "text (returned 1 instead of raising TypeError)" in detail(result)
    assert "negative (raised TypeError: negative)" in detail(result)


# -- program mode ---------------------------------------------------------------------------

PROGRAM_CASES = [
    {"name": "stdin", "args": [], "stdin": "b a b\n", "expect": "2 b\n1 a\n"},
    {"name": "top 1", "args": ["1"], "stdin": "b a b", "expect": "2 b  \n"},
    {
        "name": "a file",
        "args": ["1", "{inputs}/data/words.txt"],
        "files": {"data/words.txt": "z z y"},
        "expect": "2 z\n",
    },
    {"name": "a flag", "args": ["--json"], "stdin": "a", "expect": "1 a\n"},
    {
        "name": "usage",
        "args": ["x"],
        "expect": "",
        "exit_code": 2,
        "stderr_contains": "usage: count [N] [FILE]",
    },
]
COUNT = r"""
import collections, sys

args = [a for a in sys.argv[1:] if a != "--json"]
try:
    n = int(args[0]) if args else 10
except ValueError:
    sys.stderr.write("usage: count [N] [FILE]\n")
    sys.exit(2)
text = open(args[1]).read() if len(args) > 1 else sys.stdin.read()
counts = collections.Counter(text.split())
for word, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
    print(c, word)
"""


async def test_program_mode_stdin_args_files_and_exit_codes(tmp_path: Path) -> None:
    verifier = {
        "kind": "outputs",
        "cases": "cases.json",
        "program": ["python3", "count.py"],
        "compare": "text",
        "partial": True,
    }
    task = make_task(tmp_path, verifier, PROGRAM_CASES)
    good = await score(task, write("count.py", COUNT))
    assert good.error is None and good.reward == 1.0, detail(good)

    # exits 0 on a bad N, and cannot read files
    wrong = COUNT.replace("sys.exit(2)", "sys.exit(0)").replace("open(args[1]).read()", "''")
    bad = await score(task, write("count.py", wrong))
    assert bad.error is None and bad.reward == pytest.approx(3 / 5), detail(bad)
    assert "usage (exit 0, not 2" in detail(bad) and "a file (wrong output" in detail(bad)


async def test_program_mode_json_and_a_build_step(tmp_path: Path) -> None:
    cases = [
        {"name": "sum", "args": ["1", "2.5"], "expect": {"sum": 3.5, "ok": True}},
        {"name": "none", "args": [], "expect": {"sum": 0, "ok": True}},
    ]
    verifier = {
        "kind": "outputs",
        "cases": "cases.json",
        "program": ["./sum"],
        "build": "rm -f sum && make sum",
    }
    task = make_task(tmp_path, verifier, cases)
    source = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    double s = 0;
    for (int i = 1; i < argc; i++) s += atof(argv[i]);
    printf("{\"sum\": %g, \"ok\": true}\n", s);
    return 0;
}
"""
    script = write("sum.c", source) + "printf 'sum: sum.c\\n\\tcc -o sum sum.c\\n' > Makefile\n"
    good = await score(task, script)
    assert good.error is None and good.reward == 1.0, detail(good)
    # `"ok": 1` is not `true`; a build that fails fails every case
    one = await score(task, script.replace('\\"ok\\": true', '\\"ok\\": 1'))
    assert one.reward == 0.0 and "wrong output" in detail(one)
    broken = await score(task, write("sum.c", "int main( {"))
    assert broken.error is None and broken.reward == 0.0
    assert "the build failed" in detail(broken)


# -- a hostile agent ------------------------------------------------------------------------

EQ_CASES = [
    {"name": "number", "args": ["21"], "expect": 42},
    {"name": "text", "function": "shout", "args": ["hi"], "expect": "HI!"},
    {"name": "list", "function": "listed", "args": [], "expect": [1, 2]},
]
ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__

class Str(str):
    def __eq__(self, other):
        return True

class List(list):
    def __eq__(self, other):
        return True

def double(x):
    return Anything()

def shout(x):
    return Str("nope")

def listed():
    return List([9])
"""


async def test_an_object_equal_to_everything_scores_zero(tmp_path: Path) -> None:
    verifier = {"kind": "outputs", "cases": "cases.json", "function": "m:double", "partial": True}
    task = make_task(tmp_path, verifier, EQ_CASES)
    result = await score(task, write("m.py", ALWAYS_EQUAL))
    assert result.error is None and result.reward == 0.0, detail(result)
    assert "Anything is not a JSON type" in detail(result)


FORGER = r"""
import json, os, signal, sys

def answer(x):
    lines = "".join(
        json.dumps({"id": i, "value": 2 * x, "ok": True, "passed": True, "score": 1.0}) + "\n"
        for i in range(5)
    )
    print(lines)  # to our own stdout
    sys.__stdout__.write(lines)
    os.write(1, lines.encode())
    for fd in range(3, 20):  # the pipe to the harness, whichever it is
        try:
            os.write(fd, b'{"value": 1}')
        except OSError:
            pass
    try:  # and straight into the harness's own output
        with open("/proc/%d/fd/1" % os.getppid(), "w") as out:
            out.write(lines + '{"id": 0, "value": 4}\n')
    except OSError as e:
        sys.stderr.write("cannot forge: %s\n" % e)
    if x == 3:
        os.kill(os.getppid(), signal.SIGKILL)  # then no honest line follows
    return -1
"""


async def test_forged_harness_output_scores_zero(tmp_path: Path) -> None:
    cases = [{"name": f"twice {x}", "args": [x], "expect": 2 * x} for x in range(2, 5)]
    verifier = {"kind": "outputs", "cases": "cases.json", "function": "f:answer", "partial": True}
    task = make_task(tmp_path, verifier, cases)
    result = await score(task, write("f.py", FORGER))
    assert result.error is None and result.reward == 0.0, detail(result)


LEAKER = r"""
import json, os, shutil

try:  # imported by the hidden pytest run, which can read /agentenv/tests meanwhile
    shutil.copytree("/agentenv/tests", "/tmp/leak")
except OSError:
    pass

def answer(i):
    found = []
    for path in ("/agentenv/tests/cases.json", "/tmp/leak/cases.json"):
        try:
            with open(path) as f:
                return json.load(f)[i]["expect"]
        except (OSError, ValueError, LookupError) as e:
            found.append("%s: %s" % (path, type(e).__name__))
    return found
"""
SEES_LEAK = "import leak\n\ndef test_imports():\n    assert leak.answer\n"


async def test_the_cases_file_never_reaches_the_sandbox(tmp_path: Path) -> None:
    cases = [{"name": f"secret {i}", "args": [i], "expect": f"s3cret-{i}"} for i in range(2)]
    outputs = {"kind": "outputs", "cases": "cases.json", "function": "leak:answer", "weight": 1}
    # as root, after the others: the pytest run's copy was wiped with /tmp between checks,
    # and the cases file is nowhere (/agentenv and the workdir are mounts of their own)
    look = "! test -e /tmp/leak"
    look += " && ! find / /agentenv /workspace /tmp -xdev -name cases.json 2>/dev/null | grep -q ."
    verifier = {
        "kind": "composite",
        "mode": "weighted",
        "checks": [
            {"kind": "pytest", "weight": 0},
            {**outputs, "partial": True},
            {"kind": "command", "command": look, "weight": 0},
        ],
    }
    task = make_task(tmp_path, verifier, cases, tests={"test_sees_leak.py": SEES_LEAK})
    result = await score(task, write("leak.py", LEAKER))
    assert result.error is None, result.error
    pytest_leaf, outputs_leaf, look_leaf = result.checks
    assert pytest_leaf.passed and look_leaf.passed, detail(result)
    assert outputs_leaf.score == 0.0 and result.reward == 0.0, detail(result)
    assert "PermissionError" in outputs_leaf.detail
    assert "/tmp/leak/cases.json: FileNotFoundError" in outputs_leaf.detail


BOMBS = r"""
import sys

def make(kind):
    if kind == "ok":
        return "fine"
    if kind == "nested":
        value = []
        for _ in range(200000):
            value = [value]
        return value
    if kind == "big":
        return "x" * (50 << 20)
    if kind == "print":
        sys.stdout.write("y" * (50 << 20))
        return "fine"
    if kind == "hang":
        while True:
            pass
"""


async def test_bombs_and_hangs_fail_their_case_only(tmp_path: Path) -> None:
    kinds = ["ok", "nested", "big", "print", "hang"]
    cases = [{"name": k, "args": [k], "expect": "fine", "timeout_s": 3} for k in kinds]
    verifier = {"kind": "outputs", "cases": "cases.json", "function": "b:make", "partial": True}
    task = make_task(tmp_path / "function", verifier, cases)
    result = await score(task, write("b.py", BOMBS))
    assert result.error is None, result.error
    # "print" passes: the agent's prints go to stderr, never into the harness's lines
    assert result.reward == pytest.approx(2 / 5), detail(result)
    text = detail(result)
    assert "nested deeper than 64" in text and "larger than 1048576 bytes" in text
    assert "hang (error: timed out after 3 s)" in text

    program = r"""
import sys
kind = sys.argv[1]
if kind == "nested":
    sys.stdout.write("[" * 100000 + "]" * 100000)
elif kind == "big":
    sys.stdout.write("z" * (50 << 20))
elif kind == "hang":
    import time; time.sleep(60)
else:
    print('"fine"')
"""
    cases = [{"name": k, "args": [k], "expect": "fine"} for k in ("ok", "nested", "big", "hang")]
    verifier = {
        "kind": "outputs",
        "cases": "cases.json",
        "program": ["python3", "p.py"],
        "partial": True,
        "timeout_s": 3,
    }
    task = make_task(tmp_path / "program", verifier, cases)
    result = await score(task, write("p.py", program))
    assert result.error is None and result.reward == pytest.approx(1 / 4), detail(result)
    text = detail(result)
    assert "stdout is not JSON" in text and "output larger than" in text
    assert "timed out after 3 s" in text

    # hangs cannot hold the verifier longer than total_timeout_s: the cases left fail
    cases = [{"name": f"hang {i}", "args": ["hang"], "expect": "fine"} for i in range(2)]
    cases.append({"name": "late", "args": ["ok"], "expect": "fine"})
    verifier = {
        "kind": "outputs",
        "cases": "cases.json",
        "function": "b:make",
        "partial": True,
        "timeout_s": 2,
        "total_timeout_s": 3,
    }
    task = make_task(tmp_path / "total", verifier, cases)
    result = await score(task, write("b.py", BOMBS))
    assert result.error is None and result.reward == 0.0, detail(result)
    assert "late (error: not run: the 3 s for all cases ran out)" in detail(result)


# -- the verifier's own failures ------------------------------------------------------------


async def test_a_cases_file_spoiled_after_loading_is_a_verifier_error(tmp_path: Path) -> None:
    # loading refuses a bad cases file (tests/test_validate.py); one that went bad after
    # the task was loaded is a verifier error, never an exception
    verifier = {"kind": "outputs", "cases": "cases.json", "function": "calc:add"}
    good = [{"name": "add", "args": [1, 2], "expect": 3}]
    tasks = {name: make_task(tmp_path / name, verifier, good) for name in ("gone", "bad")}
    assert tasks["gone"].folder is not None and tasks["bad"].folder is not None
    (tasks["gone"].folder / "tests" / "cases.json").unlink()
    missing = await score(tasks["gone"], write("calc.py", CALC))
    assert missing.error is not None and "cannot read the cases file" in missing.error
    assert missing.reward == 0.0 and not missing.passed

    no_expectation = [{"name": "add", "args": [1, 2]}]
    (tasks["bad"].folder / "tests" / "cases.json").write_text(json.dumps(no_expectation))
    bad = await score(tasks["bad"], write("calc.py", CALC))
    assert bad.error is not None and "needs either expect or raises" in bad.error
