"""SWE-bench-style instances run as tasks: a real git repo (src layout, a conftest, a
parametrized test with an odd id) is built here, committed, baked into an image FROM the
offline base image at its base commit, and described by an instances file as the published
datasets are (lists JSON-encoded). The oracle applies the gold patch; the agent never sees
the test patch; attacks on the tests the verdict reads are scored 0."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from agentenv.agent.policies import oracle
from agentenv.errors import TaskError
from agentenv.runner.episode import run_task
from agentenv.runner.policy import Policies
from agentenv.sandbox.images import BASE_IMAGE, dockerfile_image
from agentenv.swebench import materialize
from agentenv.tasks import Task, load_task, load_tasks

pytestmark = pytest.mark.anyio

FILES = {
    "pyproject.toml": """\
        [project]
        name = "ranges"
        version = "0.1.0"

        [tool.pytest.ini_options]
        pythonpath = ["src"]
        testpaths = ["tests"]
        """,
    "src/ranges/__init__.py": """\
        def clamp(x, lo, hi):
            \"\"\"x limited to [lo, hi].\"\"\"
            return max(lo, min(x, lo))


        def span(xs):
            return max(xs) - min(xs)
        """,
    "tests/conftest.py": """\
        import pytest


        @pytest.fixture
        def bounds():
            return (0, 10)
        """,
    "tests/test_ranges.py": """\
        from ranges import span


        def test_span(bounds):
            assert span(list(bounds)) == 10
        """,
    "README.md": "ranges\n",
}
FIX = {
    "src/ranges/__init__.py": FILES["src/ranges/__init__.py"].replace("min(x, lo)", "min(x, hi)")
}
TESTS = {
    "tests/test_ranges.py": FILES["tests/test_ranges.py"]
    + """\


        def test_clamp(bounds):
            from ranges import clamp
            assert clamp(15, *bounds) == 10
            assert clamp(5, *bounds) == 5
        """,
    "tests/test_edges.py": """\
        import pytest
        from ranges import clamp


        @pytest.mark.parametrize("x", [-1, 11], ids=["below lo", "above[hi]"])
        def test_edges(x):
            assert clamp(x, 0, 10) in (0, 10)
            assert clamp(3, 0, 10) == 3
        """,
}
F2P = [
    "tests/test_ranges.py::test_clamp",
    "tests/test_edges.py::test_edges[below lo]",
    "tests/test_edges.py::test_edges[above[hi]]",
]
P2P = ["tests/test_ranges.py::test_span"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """An instance of a repo made here: base commit, gold patch and test patch from real
    commits, its image's Dockerfile next to the instances file."""
    root = tmp_path_factory.mktemp("swebench")
    repo = root / "context" / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    _write(repo, FILES)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    _write(repo, FIX)
    gold = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", ".")
    _write(repo, TESTS)
    _git(repo, "add", "-N", ".")
    test_patch = _git(repo, "diff")
    _git(repo, "reset", "-q")
    _git(repo, "checkout", "-q", "--", ".")
    _git(repo, "clean", "-fdq")
    # the repo on sys.path through a .pth file, as an editable install puts it, and no
    # sitecustomize of Debian's in front of it (a conda Python, as SWE-bench's, has none)
    (root / "context" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nCOPY repo /testbed\n"
        "RUN echo /testbed/src > /usr/lib/python3/dist-packages/ranges-editable.pth"
        " && rm -f /usr/lib/python3*/sitecustomize.py /etc/python3*/sitecustomize.py\n"
    )
    return {
        "instance_id": "acme__ranges-1",
        "repo": "acme/ranges",
        "base_commit": base,
        "problem_statement": "clamp() ignores hi\n\nclamp(15, 0, 10) gives 0, not 10.\n",
        "test_patch": test_patch,
        "patch": gold,
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "dockerfile": str(root / "context" / "Dockerfile"),
        "version": "0.1",
        "hints_text": "",
    }


def instances_file(root: Path, *instances: dict[str, object], name: str = "i.jsonl") -> Path:
    path = root / name
    path.write_text("".join(json.dumps(i) + "\n" for i in instances))
    return path


@pytest.fixture
def task(instance: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Task:
    monkeypatch.setenv("AGENTENV_CACHE", str(tmp_path / "cache"))
    [task] = load_tasks([instances_file(tmp_path, instance)])
    return task


async def _episode(task: Task, policy: object) -> tuple[float, dict[str, object]]:
    traj, _ = await run_task(task, policy)  # type: ignore[arg-type]
    assert traj.score is not None and traj.score.error is None, traj.score
    checks = {c.name: c for c in traj.score.checks}
    return traj.reward or 0.0, checks  # type: ignore[return-value]


async def test_oracle_resolves_and_both_lists_are_reported(task: Task) -> None:
    assert task.id == "acme__ranges-1" and task.workdir == "/testbed"
    assert "clamp() ignores hi" in task.instruction and "swebench" in task.tags
    policies = Policies("oracle")
    traj, _ = await run_task(task, policies.for_task(task))
    assert traj.score is not None and traj.score.suspicious == [], traj.score  # an honest fix
    checks = {c.name: c for c in traj.score.checks}
    assert traj.reward == 1.0, checks
    f2p, p2p = checks["FAIL_TO_PASS"], checks["PASS_TO_PASS"]
    assert f2p.tests == dict.fromkeys(F2P, "passed"), f2p  # type: ignore[attr-defined]
    assert p2p.tests == dict.fromkeys(P2P, "passed"), p2p  # type: ignore[attr-defined]


async def test_no_change_fails_the_fail_to_pass_tests_only(task: Task) -> None:
    reward, checks = await _episode(task, Policies("null").for_task(task))
    assert reward == 0.0
    f2p, p2p = checks["FAIL_TO_PASS"], checks["PASS_TO_PASS"]
    assert not f2p.passed and f2p.tests == dict.fromkeys(F2P, "failed")  # type: ignore[attr-defined]
    assert f2p.detail.startswith("0/3 passed; not passed: ")  # type: ignore[attr-defined]
    assert p2p.passed and p2p.detail == "1/1 passed"  # type: ignore[attr-defined]


async def test_an_instance_naming_its_image_gets_the_repo_from_it(
    instance: dict[str, object], task: Task, tmp_path: Path
) -> None:
    # SWE-bench's own way: an image holding the repo, no Dockerfile. The agent's workdir is
    # the image's (its bounded volume starts empty, so it is read from a container first)
    assert task.folder is not None and task.dockerfile is not None
    built = dockerfile_image(task.image, task.folder / task.dockerfile, task.id)
    await _episode(task, Policies("oracle").for_task(task))  # builds it, if not yet
    plain = {k: v for k, v in instance.items() if k != "dockerfile"}
    [folder] = materialize(
        instances_file(tmp_path, {**plain, "image": built}, name="by-image.jsonl"),
        into=tmp_path / "by-image",
    )
    by_image = load_task(folder)
    assert by_image.image == built and by_image.dockerfile is None
    reward, checks = await _episode(by_image, Policies("oracle").for_task(by_image))
    assert reward == 1.0, checks
    reward, _ = await _episode(by_image, Policies("null").for_task(by_image))
    assert reward == 0.0


def _agent(script: str) -> object:
    return oracle("#!/bin/bash\nset -e\n" + textwrap.dedent(script))


# what an agent that did not fix clamp can do to the tests the verdict reads: each is a 0
ATTACKS = {
    # its own versions of the tests the test patch brings, which pass unfixed
    "own tests": """\
        cat > tests/test_edges.py <<'EOF'
        import pytest
        @pytest.mark.parametrize("x", [1, 2], ids=["below lo", "above[hi]"])
        def test_edges(x):
            pass
        EOF
        printf 'def test_clamp():\\n    pass\\n' >> tests/test_ranges.py
        """,
    # a conftest that turns every report into a pass, in the tests' folder and at the root
    "conftest forging passes": """\
        for d in . tests; do cat > $d/conftest.py <<'EOF'
        import pytest
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            out = yield
            r = out.get_result()
            r.outcome = "passed"
            r.longrepr = None
        EOF
        done
        """,
    # the fix, but the passing tests broken
    "breaks span": """\
        git -c safe.directory='*' apply "$SOLUTION_DIR/gold.patch" 2>/dev/null || true
        sed -i 's/return max(xs) - min(xs)/return 0/' src/ranges/__init__.py
        """,
    # an ini file deeper than the repo's own moves pytest's rootdir (and every test id) onto
    # passing tests of its own, with the real ones collected under other ids
    "rootdir shift": """\
        printf '[pytest]\\naddopts = --import-mode=importlib tests/tests\\n' > tests/pytest.ini
        mkdir -p tests/tests
        printf 'def test_clamp():\\n    pass\\ndef test_span():\\n    pass\\n' \\
            > tests/tests/test_ranges.py
        cat > tests/tests/test_edges.py <<'EOF'
        import pytest
        @pytest.mark.parametrize("x", [1, 2], ids=["below lo", "above[hi]"])
        def test_edges(x):
            pass
        EOF
        """,
    # bytecode for the conftest.py that will be restored (its size and mtime are known):
    # pytest would run the planted .pyc in its place, a hook forging every report
    "planted conftest bytecode": """\
        cat > /tmp/forge.py <<'EOF'
        import pytest
        @pytest.fixture
        def bounds():
            return (0, 10)
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            out = yield
            out.get_result().outcome = "passed"
        EOF
        python3 - <<'EOF'
        import importlib.util, marshal, os, sys
        import _pytest, _pytest.assertion.rewrite as rw
        src = "tests/conftest.py"
        st = os.stat(src)
        tree = rw.ast.parse(open("/tmp/forge.py", "rb").read())
        code = compile(tree, os.path.abspath(src), "exec")
        tag = sys.implementation.cache_tag + "-pytest-" + _pytest.__version__
        os.makedirs("tests/__pycache__", exist_ok=True)
        with open("tests/__pycache__/conftest.%s.pyc" % tag, "wb") as f:
            f.write(importlib.util.MAGIC_NUMBER + b"\\0\\0\\0\\0")
            f.write((int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little"))
            f.write((st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
            f.write(marshal.dumps(code))
        EOF
        """,
    # a sitecustomize.py where an editable install puts the repo on sys.path: it would run
    # in the root process that reads pytest's report, and rewrite it
    "sitecustomize": """\
        cat > src/sitecustomize.py <<'EOF'
        import json, os, sys
        if os.getuid() == 0:
            write = sys.stdout.write
            def forged(s):
                try:
                    d = json.loads(s)
                    d["outcomes"] = {k: "passed" for k in d["outcomes"]}
                    s = json.dumps(d)
                except Exception:
                    pass
                return write(s)
            sys.stdout.write = forged
        EOF
        """,
    # a folder where a test file goes, left so that its own user cannot replace it
    "unwritable tests": """\
        chmod 0555 tests
        """,
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
async def test_attacks_on_the_tests_score_zero(task: Task, name: str) -> None:
    reward, checks = await _episode(task, _agent(ATTACKS[name]))
    assert reward == 0.0, checks


async def test_a_fix_with_the_agents_own_conftest_change_still_passes(task: Task) -> None:
    # the repo's conftest.py comes back as it was: the fixture the tests need is there
    script = """\
        git -c safe.directory='*' apply "$SOLUTION_DIR/gold.patch"
        rm tests/conftest.py
        """
    policy = oracle(
        "#!/bin/bash\nset -e\n" + textwrap.dedent(script),
        files={"gold.patch": task.solution_files()["gold.patch"]},
    )
    reward, checks = await _episode(task, policy)
    assert reward == 1.0, checks


# clamp returns a value equal to anything: the repo's tests, which import it and compare in
# their own process, pass; the host's scan of the changed files sees it
ALWAYS_EQUAL = """\
    cat >> src/ranges/__init__.py <<'EOF'


    class _Anything(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__


    def clamp(x, lo, hi):
        return _Anything(0)
    EOF
    """


@pytest.mark.parametrize("on_suspicious", [None, "zero"])
async def test_an_always_equal_fix_is_flagged_and_scored_as_the_instance_chose(
    instance: dict[str, object], tmp_path: Path, on_suspicious: str | None
) -> None:
    chosen = {**instance, "on_suspicious": on_suspicious} if on_suspicious else instance
    [task] = load_tasks([instances_file(tmp_path, chosen)])
    traj, _ = await run_task(task, _agent(ALWAYS_EQUAL))  # type: ignore[arg-type]
    score = traj.score
    assert score is not None and score.error is None, score
    assert score.suspicious == [
        "FAIL_TO_PASS: src/ranges/__init__.py: __eq__ ignores what it is compared with"
    ], score
    assert traj.reward == (0.0 if on_suspicious == "zero" else 1.0), score  # review by default


def test_bad_instances_name_the_line_and_field(
    instance: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTENV_CACHE", str(tmp_path / "cache"))
    cases = [
        ({"FAIL_TO_PASS": "[]"}, r"i.jsonl:2: FAIL_TO_PASS: empty"),
        ({"FAIL_TO_PASS": "not json"}, r"i.jsonl:2: FAIL_TO_PASS: not a list"),
        (
            {"PASS_TO_PASS": ["test_x (tests.TestCase)"]},
            r"i.jsonl:2: PASS_TO_PASS: 'test_x \(tests.TestCase\)' is not a pytest node id",
        ),
        ({"test_patch": "nothing"}, r"i.jsonl:2: test_patch: not a git diff"),
        ({"base_commit": None}, r"i.jsonl:2: base_commit: missing"),
        ({"instance_id": "a/b"}, r"i.jsonl:2: instance_id: 'a/b'"),
        ({"dockerfile": "nope/Dockerfile"}, r"i.jsonl:2: dockerfile: .*nope/Dockerfile not found"),
        ({"instance_id": "x\n"}, r"i.jsonl:2: instance_id: 'x\\n'"),
        ({"timeout_s": float("inf")}, r"i.jsonl:2: timeout_s: inf is not a timeout"),
        ({"PASS_TO_PASS": ["-p::x"]}, r"i.jsonl:2: PASS_TO_PASS: '-p::x' would reach pytest"),
        ({"repo": "acme/\ud800"}, r"i.jsonl:2: repo: holds a lone surrogate"),
        ({"on_suspicious": "ignore"}, r"i.jsonl:2: on_suspicious: 'ignore': either 'zero'"),
    ]
    for change, message in cases:
        other = {**instance, "instance_id": "acme__ranges-2", **change}
        path = instances_file(tmp_path, instance, other)
        with pytest.raises(TaskError, match=message):
            load_tasks([path])
    (tmp_path / "bad.jsonl").write_text(json.dumps(instance) + "\n{oops\n")
    with pytest.raises(TaskError, match=r"bad.jsonl:2: not valid JSON"):
        load_tasks([tmp_path / "bad.jsonl"])
    twice = instances_file(tmp_path, instance, instance, name="twice.jsonl")
    with pytest.raises(TaskError, match=r"twice.jsonl:2: instance_id 'acme__ranges-1' is also"):
        load_tasks([twice])


def test_folders_are_written_once_and_a_json_array_loads(
    instance: dict[str, object], tmp_path: Path
) -> None:
    path = tmp_path / "i.json"
    path.write_text(json.dumps([instance, {**instance, "instance_id": "acme__ranges-2"}]))
    first = materialize(path, into=tmp_path / "tasks")
    stamp = [(f / "task.toml").stat().st_mtime_ns for f in first]
    again = materialize(path, into=tmp_path / "tasks")
    assert again == first and [(f / "task.toml").stat().st_mtime_ns for f in again] == stamp
    task = load_task(first[1])
    assert task.id == "acme__ranges-2" and task.tests is not None
    assert (task.tests / "test.patch").read_text() == instance["test_patch"]
    assert task.verifier is not None and task.verifier.kind == "swebench"
    # the agent's instruction holds nothing of the test patch
    assert "test_edges" not in task.instruction
    # the image name SWE-bench gives it, when neither image nor dockerfile is given
    plain = {k: v for k, v in instance.items() if k != "dockerfile"}
    path.write_text(json.dumps([{**plain, "instance_id": "django__django-11099"}]))
    [folder] = materialize(path, into=tmp_path / "plain")
    assert load_task(folder).image == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
