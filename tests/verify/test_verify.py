"""Verifiers against real sandboxes, as episodes use them: the agent's files are made in an
agent sandbox (unprivileged, read-only root), its workdir is taken as the lifecycle's
``finish`` takes it, and the checks run in a checker sandbox. Each kind passes and fails,
partial credit, hidden tests arrive only at verification, planted files, links and leftover
processes cannot change the verdict, a broken verifier is an error (not the agent failing),
and verifying the same state twice gives the same score."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agentenv.archive import Archive
from agentenv.runner.workspace import safe_workspace
from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import DockerSandbox
from agentenv.verify import AGENT_USER, CHECKER_CAPS, Check, Score, Workspace, is_subset
from agentenv.verify import verify as verify_in

pytestmark = pytest.mark.anyio
CHECK: TypeAdapter[Check] = TypeAdapter(Check)


def check(**fields: Any) -> Check:
    return CHECK.validate_python(fields)


@pytest.fixture(scope="module")
async def agent() -> AsyncIterator[DockerSandbox]:
    spec = SandboxSpec(user=AGENT_USER, read_only=True, env={"HOME": "/tmp"})
    async with await DockerSandbox.create(spec) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
async def checker() -> AsyncIterator[DockerSandbox]:
    spec = SandboxSpec(user="0:0", cap_add=CHECKER_CAPS)
    async with await DockerSandbox.create(spec) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
async def box(agent: DockerSandbox, checker: DockerSandbox) -> Boxes:
    return Boxes(agent, checker)


class Boxes:
    """The agent's sandbox (where its files are made) and the checker sandbox."""

    def __init__(self, agent: DockerSandbox, checker: DockerSandbox):
        self.agent, self.checker = agent, checker

    async def exec(self, cmd: str) -> Any:
        """Run ``cmd`` as the agent, in its sandbox."""
        return await self.agent.exec(cmd)


async def verify(box: Boxes, check: Check, *, tests: Path | None = None) -> Score:
    """Take the agent's workdir as ``finish`` does and verify it in the checker sandbox."""
    raw = Archive.new()
    await box.agent.download_to("/workspace", raw)
    archive, _ = safe_workspace(raw, "/workspace", AGENT_USER)
    return await verify_in(box.checker, check, Workspace(archive=archive), tests=tests)


@pytest.fixture(scope="module")
def tests_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hidden")
    (folder / "test_calc.py").write_text(
        "import calc\n\n"
        "def test_add():\n    assert calc.add(2, 3) == 5\n\n"
        "def test_sub():\n    assert calc.sub(5, 3) == 2\n\n"
        "def test_mul():\n    assert calc.mul(2, 3) == 6\n\n"
        "def test_reads_relative_files():\n    assert open('data.txt').read() == 'x'\n"
    )
    (folder / "check.sh").write_text('test "$(cat out.txt)" = hello\n')
    return folder


async def write(box: Boxes, files: dict[str, str]) -> None:
    await box.agent.exec("pkill -9 -f '[e]cho hello'; rm -rf /workspace/* /workspace/.[!.]*")
    for path, text in files.items():
        await box.agent.write_file(f"/workspace/{path}", text.encode())


CALC_TWO_OF_THREE = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"


async def test_pytest_partial_credit_and_all_or_nothing(box: Boxes, tests_dir: Path) -> None:
    await write(box, {"calc.py": CALC_TWO_OF_THREE, "data.txt": "x"})
    partial = await verify(box, check(kind="pytest", partial=True), tests=tests_dir)
    assert partial.error is None
    assert partial.reward == pytest.approx(0.75) and not partial.passed
    assert "3/4 passed" in partial.checks[0].detail and "test_mul" in partial.checks[0].detail
    strict = await verify(box, check(kind="pytest"), tests=tests_dir)
    assert strict.reward == 0.0 and strict.error is None
    await write(
        box, {"calc.py": CALC_TWO_OF_THREE + "def mul(a, b):\n    return a * b\n", "data.txt": "x"}
    )
    assert (await verify(box, check(kind="pytest"), tests=tests_dir)).reward == 1.0

    # code that does not even import is the agent failing, not the verifier
    await write(box, {"calc.py": "def add(a, b) return", "data.txt": "x"})
    broken = await verify(box, check(kind="pytest", partial=True), tests=tests_dir)
    assert broken.error is None and broken.reward == 0.0


async def test_what_the_agent_leaves_cannot_change_the_verdict(box: Boxes, tests_dir: Path) -> None:
    await write(
        box,
        {
            "calc.py": CALC_TWO_OF_THREE,
            "data.txt": "x",
            # a conftest that turns every failure into a pass, and a config that loads it
            "conftest.py": (
                "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
                "def pytest_runtest_makereport(item, call):\n"
                "    out = yield\n    out.get_result().outcome = 'passed'\n"
            ),
            "pytest.ini": "[pytest]\naddopts = -p conftest\n",
            "json.py": "raise SystemExit('shadowed the standard library')\n",
        },
    )
    # a planted reward file and fake tests where the hidden ones go (the root filesystem is
    # read-only, so these fail), and a process that keeps rewriting the file under check
    planted = await box.exec(
        "mkdir -p /agentenv/out /agentenv/tests && echo 1 > /agentenv/out/reward && "
        "echo 'def test_ok(): pass' > /agentenv/tests/test_fake.py"
    )
    assert planted.exit_code != 0 and "Read-only file system" in planted.stderr
    await box.exec(
        "nohup sh -c 'while :; do echo hello > /workspace/out.txt; sleep 0.05; done' "
        ">/dev/null 2>&1 &"
    )
    review = check(kind="pytest", partial=True, on_suspicious="review")
    score = await verify(box, review, tests=tests_dir)
    assert score.reward == pytest.approx(0.75)  # the hooks did not run; the fake test is gone
    # what it tried is flagged all the same, and by default the check then scores 0
    assert any("conftest.py" in s for s in score.suspicious), score.suspicious
    assert any("pytest.ini" in s for s in score.suspicious), score.suspicious
    zeroed = await verify(box, check(kind="pytest", partial=True), tests=tests_dir)
    assert zeroed.reward == 0.0 and zeroed.error is None and zeroed.suspicious
    assert "scored 0, suspicious" in zeroed.checks[0].detail
    assert (await box.checker.exec("test -e /agentenv/out/reward")).exit_code == 1
    assert (await box.checker.exec("test -e /agentenv/tests/test_fake.py")).exit_code == 1
    await box.exec("pkill -9 -f '[e]cho hello'; rm -f /workspace/out.txt")
    gone = await verify(box, check(kind="command", command="test ! -e out.txt"), tests=tests_dir)
    assert gone.passed  # the writer lives in the agent's sandbox, not the checker's


async def test_file_json_and_command_checks(box: Boxes, tests_dir: Path) -> None:
    report = {"errors": 3, "top": ["a", "b"], "extra": True}
    await write(box, {"out.txt": "hello\n", "report.json": json.dumps(report), "null.json": "null"})
    cases: list[tuple[dict[str, Any], float]] = [
        ({"kind": "file", "path": "out.txt", "equals": "hello"}, 1.0),
        ({"kind": "file", "path": "out.txt", "equals": "hello!"}, 0.0),
        ({"kind": "file", "path": "out.txt", "regex": "^hel+o$"}, 1.0),
        ({"kind": "file", "path": "missing.txt"}, 0.0),
        (
            {
                "kind": "file",
                "path": "out.txt",
                "sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
            },
            1.0,
        ),
        ({"kind": "json", "path": "report.json", "subset": {"errors": 3, "top": ["a", "b"]}}, 1.0),
        ({"kind": "json", "path": "report.json", "subset": {"errors": 4}}, 0.0),
        ({"kind": "json", "path": "report.json", "equals": report}, 1.0),
        ({"kind": "json", "path": "out.txt", "equals": {}}, 0.0),
        ({"kind": "json", "path": "report.json", "subset": {"extra": 1}}, 0.0),  # true is not 1
        ({"kind": "json", "path": "null.json", "equals": None}, 1.0),  # null is a value
        ({"kind": "json", "path": "report.json", "equals": None}, 0.0),
        ({"kind": "command", "command": "bash /agentenv/tests/check.sh"}, 1.0),
        ({"kind": "command", "command": "test -e nothing"}, 0.0),
    ]
    for fields, expected in cases:
        score = await verify(box, check(**fields), tests=tests_dir)
        assert (score.reward, score.error) == (expected, None), fields


async def test_composite_modes(box: Boxes, tests_dir: Path) -> None:
    await write(box, {"out.txt": "hello"})
    good = {"kind": "file", "path": "out.txt"}
    bad = {"kind": "file", "path": "nope.txt"}
    weighted = check(
        kind="composite", mode="weighted", checks=[{**good, "weight": 3}, {**bad, "weight": 1}]
    )
    score = await verify(box, weighted)
    assert score.reward == pytest.approx(0.75) and not score.passed and len(score.checks) == 2
    assert (await verify(box, check(kind="composite", mode="all", checks=[good, bad]))).reward == 0
    assert (await verify(box, check(kind="composite", mode="any", checks=[good, bad]))).reward == 1
    nested = check(kind="composite", checks=[good, {"kind": "composite", "checks": [good, good]}])
    assert (await verify(box, nested)).passed


async def test_png_images(box: Boxes) -> None:
    await write(box, {})
    await box.exec(
        'python3 -c "from PIL import Image, ImageDraw\n'
        "im = Image.new('RGB', (320, 240), 'white')\n"
        "ImageDraw.Draw(im).rectangle([20, 20, 100, 200], fill='blue')\n"
        "im.save('chart.png')\n"
        "Image.new('RGB', (320, 240), 'white').save('blank.png')\n"
        "im.resize((40, 30)).save('small.png')\n"
        "Image.new('P', (64, 64), 3).save('palette.png')\"\n"
        "printf 'not a png' > fake.png; head -c 100 chart.png > cut.png"
    )
    verdicts = {}
    for name in ("chart", "blank", "small", "palette", "fake", "cut", "missing"):
        score = await verify(
            box, check(kind="image", path=f"{name}.png", min_width=200, min_height=150)
        )
        assert score.error is None, score.error
        verdicts[name] = (score.reward, score.checks[0].detail)
    assert verdicts["chart"][0] == 1.0
    assert "blank" in verdicts["blank"][1] and verdicts["blank"][0] == 0
    assert "smaller" in verdicts["small"][1]
    assert all(verdicts[n][0] == 0 for n in ("palette", "fake", "cut", "missing"))


async def test_a_broken_verifier_is_an_error_not_a_failure(box: Boxes) -> None:
    await write(box, {"calc.py": CALC_TWO_OF_THREE})
    no_tests = await verify(box, check(kind="pytest"), tests=None)
    assert no_tests.error is not None and no_tests.reward == 0.0 and not no_tests.passed
    missing = await verify(box, check(kind="command", command="/agentenv/tests/nothing.sh"))
    assert missing.error is not None and "could not run" in missing.error
    mixed = await verify(
        box,
        check(
            kind="composite",
            mode="any",
            checks=[
                {"kind": "file", "path": "calc.py"},
                {"kind": "command", "command": "nonexistent-cmd"},
            ],
        ),
    )
    assert mixed.error is not None and mixed.reward == 0.0  # no valid reward with a broken part


async def test_verifying_twice_gives_the_same_score(box: Boxes, tests_dir: Path) -> None:
    await write(box, {"calc.py": CALC_TWO_OF_THREE, "data.txt": "x", "out.txt": "hello"})
    combined = check(
        kind="composite",
        mode="weighted",
        checks=[
            {"kind": "pytest", "partial": True},
            {"kind": "command", "command": "bash /agentenv/tests/check.sh"},
        ],
    )
    first = await verify(box, combined, tests=tests_dir)
    second = await verify(box, combined, tests=tests_dir)
    strip: dict[str, Any] = {"duration_s": True, "checks": {"__all__": {"duration_s"}}}
    assert first.model_dump(exclude=strip) == second.model_dump(exclude=strip)
    assert first.reward == pytest.approx((0.75 + 1.0) / 2)
    assert Score.model_validate_json(first.model_dump_json()) == first


def test_bad_verifier_config_names_the_field() -> None:
    with pytest.raises(ValidationError, match="kind"):
        check(kind="magic")
    with pytest.raises(ValidationError, match="min_width"):
        check(kind="image", path="x.png", min_width=0)
    with pytest.raises(ValidationError, match="timeout_s"):
        check(kind="command", command="true", timeout_s=-1)
    assert is_subset({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2, "c": 3}], "d": 4})
    assert not is_subset([1], [1, 2])


async def test_what_the_code_under_test_does_is_graded_not_an_error(
    box: Boxes, tests_dir: Path
) -> None:
    # it hangs, it kills the test run, it skips itself: each is the agent failing (0), not a
    # broken verifier that would drop the episode out of pass@k
    hang = CALC_TWO_OF_THREE + "def mul(a, b):\n    while True:\n        pass\n"
    await write(box, {"calc.py": hang, "data.txt": "x"})
    slow = await verify(box, check(kind="pytest", timeout_s=3), tests=tests_dir)
    assert slow.error is None and slow.reward == 0.0 and "timed out" in slow.checks[0].detail
    await write(box, {"calc.py": "import os\nos._exit(0)\n", "data.txt": "x"})
    gone = await verify(box, check(kind="pytest"), tests=tests_dir)
    assert gone.error is None and gone.reward == 0.0
    skip = "import pytest\npytest.skip('later', allow_module_level=True)\n"
    await write(box, {"calc.py": skip, "data.txt": "x"})
    skipped = await verify(box, check(kind="pytest", partial=True), tests=tests_dir)
    assert skipped.error is None and skipped.reward == 0.0
    command = await verify(box, check(kind="command", command="sleep 5", timeout_s=0.5))
    assert command.error is None and command.reward == 0.0


async def test_hidden_processes_and_links_into_the_tests_do_not_help(
    box: Boxes, tests_dir: Path
) -> None:
    await write(box, {"calc.py": CALC_TWO_OF_THREE, "data.txt": "x"})
    # a writer that dropped our tag and its session, and a link planted where a hidden
    # file will appear
    await box.exec(
        "ln -s /agentenv/tests/check.sh /workspace/out.txt; "
        "env -u AGENTENV_EXEC setsid nohup sh -c 'while :; do echo hello > /workspace/x; "
        "sleep 0.05; done' >/dev/null 2>&1 &"
    )
    score = await verify(box, check(kind="command", command="test ! -L out.txt"), tests=tests_dir)
    await box.exec("pkill -9 -f '[e]cho hello'; rm -f /workspace/x")
    again = await verify(box, check(kind="command", command="sleep 0.3; test ! -e x"))
    assert score.passed and again.passed
    seen = await box.checker.exec("ps -eo args | grep -c '[e]cho hello'")
    assert seen.stdout.strip() == "0"


FORGE = """
import atexit, json, os

def add(a, b):
    return 0

sub = mul = add
FAKE = json.dumps({"nonce": "guess", "outcomes": {"test_calc.py::test_add": "passed"}})
LINE = json.dumps({"outcomes": {"a": "passed"}, "exit": 0, "log": ""})

def forge(data):
    for fd in range(64):  # every descriptor the process has: the report pipe among them
        try:
            os.write(fd, data)
        except OSError:
            pass
"""
ATTACKS = {
    "a forged report at exit": FORGE + "atexit.register(forge, FAKE.encode())\n",
    "a forged report, then os._exit": FORGE + "forge(FAKE.encode())\nos._exit(0)\n",
    "a result line printed, then os._exit": FORGE + "print(LINE, flush=True)\nos._exit(0)\n",
    "a nesting bomb down every pipe": FORGE + "forge(b'[' * 1000000)\nos._exit(0)\n",
    "a 20 MB report at exit": FORGE + "atexit.register(forge, b' ' * (20 << 20))\n",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_code_under_pytest_cannot_forge_the_report(
    box: Boxes, tests_dir: Path, attack: str
) -> None:
    await write(box, {"calc.py": ATTACKS[attack], "data.txt": "x"})
    score = await verify(box, check(kind="pytest", partial=True), tests=tests_dir)
    # the real tests ran and failed (3 of 4), or there was no acceptable report: never more
    assert score.error is None and score.reward <= 0.25, (attack, score)


async def test_pytest_args_reach_pytest_as_given(box: Boxes, tests_dir: Path) -> None:
    # node ids, -k expressions and --ignore are read from the tests folder; nothing is
    # prefixed to them (a deselect used to be silently ignored, -k to be an error)
    await write(box, {"calc.py": CALC_TWO_OF_THREE, "data.txt": "x"})
    args = ["test_calc.py", "--deselect", "test_calc.py::test_mul", "-k", "not relative"]
    score = await verify(box, check(kind="pytest", args=args), tests=tests_dir)
    assert score.error is None and score.passed, score.checks[0].detail
    assert "2/2 passed" in score.checks[0].detail
    ignored = await verify(
        box, check(kind="pytest", args=[".", "--ignore", "test_calc.py"]), tests=tests_dir
    )
    assert not ignored.passed and "test_add" not in ignored.checks[0].detail


async def test_skips_are_shown_and_only_the_tests_own_markers_may_be_left_out(
    box: Boxes, tmp_path: Path
) -> None:
    hidden = tmp_path / "hidden-skips"
    hidden.mkdir()
    (hidden / "test_skips.py").write_text(
        "import sys, pytest, calc\n\n"
        "def test_add():\n    assert calc.add(2, 3) == 5\n\n"
        "@pytest.mark.skip(reason='not graded yet')\n"
        "def test_later():\n    assert False\n\n"
        "@pytest.mark.skipif(sys.platform == 'linux', reason='not on linux')\n"
        "def test_elsewhere():\n    assert False\n\n"
        "def test_sub():\n    assert calc.sub(5, 3) == 2\n"
    )
    honest = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
    # the agent's sub() cannot pass, so it skips the test that calls it
    cheat = "import pytest\n\n" + honest.replace("return a - b", "pytest.skip('busy')")
    await write(box, {"calc.py": honest})
    strict = await verify(box, check(kind="pytest"), tests=hidden)
    assert strict.reward == 0.0 and "2/4 passed" in strict.checks[0].detail
    assert "test_later (skipped: not graded yet)" in strict.checks[0].detail
    assert "test_elsewhere (skipped: not on linux)" in strict.checks[0].detail
    lenient = await verify(box, check(kind="pytest", skipped="exclude"), tests=hidden)
    assert lenient.reward == 1.0 and lenient.passed, lenient.checks[0].detail
    assert "2/2 passed; 2 skipped by the tests' markers, left out" in lenient.checks[0].detail
    await write(box, {"calc.py": cheat})
    cheated = await verify(box, check(kind="pytest", skipped="exclude", partial=True), tests=hidden)
    assert cheated.reward == 0.5 and not cheated.passed
    assert "test_sub (skipped-run: busy)" in cheated.checks[0].detail
