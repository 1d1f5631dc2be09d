"""The ``harbor`` check's modes: how task.toml's ``[verifier]`` maps to them, the system-file
findings and what they do to a score, and a ``separate`` verifier that sees the declared
artifacts and nothing else of the agent's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentenv.runner.episode import run_task
from agentenv.runner.harbor_verdict import flag_changes
from agentenv.runner.policy import Policies
from agentenv.runner.system_changes import _upper_changes, findings
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import Task, load_task
from agentenv.verify.kinds.harbor import HarborCheck, _from_json
from agentenv.verify.score import CheckResult, Score


def _task(root: Path, verifier: str = "", top: str = "", test: str = "exit 0\n") -> Task:
    folder = root / "t"
    (folder / "environment").mkdir(parents=True, exist_ok=True)
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "solution").mkdir(exist_ok=True)
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\n" + test)
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "task.toml").write_text(
        f'version = "1.0"\n{top}\n[verifier]\ntimeout_sec = 60.0\n{verifier}\n'
    )
    return load_task(folder)


@pytest.mark.no_docker
def test_environment_mode_maps_to_the_checks_mode(tmp_path: Path) -> None:
    cases = {
        "": ("final", "final"),
        'environment_mode = "shared"': ("shared", "agent"),
        'environment_mode = "separate"': ("separate", "final"),
        '[verifier.environment]\ndocker_image = "x/y:1"': ("separate", "final"),
    }
    for verifier, (mode, verify_in) in cases.items():
        task = _task(tmp_path, verifier)
        check = task.verifier
        assert isinstance(check, HarborCheck)
        assert (check.mode, task.verify_in) == (mode, verify_in), verifier
        if mode == "separate":  # artifacts are what a separate verifier gets
            top = 'artifacts = ["/app/out", {source = "/data"}]'
            check = _task(tmp_path, verifier, top=top).verifier
            assert isinstance(check, HarborCheck)
            assert [a.source for a in check.artifacts] == ["/app/out", "/data"]
    check = _task(tmp_path, '[verifier.environment]\ndocker_image = "x/y:1"').verifier
    assert isinstance(check, HarborCheck) and check.image == "x/y:1"


@pytest.mark.no_docker
def test_findings_keep_system_files_leaves_and_allowed_globs_out() -> None:
    changes = [
        ("changed", "/usr"),
        ("changed", "/usr/local"),
        ("changed", "/usr/local/bin"),
        ("added", "/usr/local/bin/python3"),
        ("changed", "/usr/bin/bash"),
        ("added", "/etc/ld.so.preload"),
        ("added", "/usr/lib/python3/dist-packages/x.pth"),
        ("added", "/usr/lib/python3.11/__pycache__/os.cpython-311.pyc"),
        ("added", "/app/out.txt"),
        ("changed", "/etc/hostname"),
        ("added", "/usr/local/bin/mytool"),
        ("added", "/usr/sbin/docker-init"),  # the engine's --init, in every container
    ]
    assert findings(changes, ["/usr/local/bin/mytool"]) == [
        "/etc/ld.so.preload added",
        "/usr/bin/bash changed",
        "/usr/lib/python3/dist-packages/x.pth added",
        "/usr/local/bin/python3 added",
    ]


@pytest.mark.no_docker
def test_a_flag_is_a_review_by_default_and_a_zero_when_the_task_says() -> None:
    score = Score(
        reward=1.0, passed=True, checks=[CheckResult(name="reward", score=1, passed=True)]
    )
    check = HarborCheck(kind="harbor")
    changed = [("added", "/usr/local/bin/python3")]
    flagged = flag_changes(score, check, changed)
    assert flagged.reward == 1.0
    assert flagged.suspicious == [
        "tests/test.sh: system file /usr/local/bin/python3 added by the agent"
    ]
    zero = flag_changes(score, check.model_copy(update={"on_system_change": "zero"}), changed)
    assert zero.reward == 0.0 and not zero.passed and zero.suspicious == flagged.suspicious
    assert flag_changes(score, check, None) == score  # the backend could not say
    allowed = check.model_copy(update={"allow_system_changes": ["/usr/local/bin/*"]})
    assert flag_changes(score, allowed, changed) == score


@pytest.mark.no_docker
def test_reward_json_values_must_be_finite_numbers() -> None:
    assert _from_json(b'{"reward": 0.5, "a": 1}') == {"reward": 0.5, "a": 1.0}
    assert _from_json(b"1") == {"reward": 1.0}
    for bad in (b'{"reward": "1"}', b'{"reward": true}', b"[]", b"{}", b'{"r": NaN}'):
        with pytest.raises(ValueError):
            _from_json(bad)


@pytest.mark.anyio
async def test_separate_sees_the_artifacts_and_nothing_else_of_the_agents(tmp_path: Path) -> None:
    # the agent writes its answer (a declared artifact) and a file outside it; the separate
    # verifier, a fresh sandbox of the task's image, has the first and not the second
    test = (
        "a=$(cat /app/answer.txt 2>/dev/null); b=$(cat /app/other.txt 2>/dev/null || echo none)\n"
        'echo "a=$a b=$b"\n'
        'if [ "$a" = 42 ] && [ "$b" = none ]; then echo 1; else echo 0; fi'
        " > /logs/verifier/reward.txt\n"
    )
    task = _task(
        tmp_path,
        'environment_mode = "separate"',
        top='artifacts = ["/app/answer.txt"]',
        test=test,
    )
    assert task.folder is not None
    (task.folder / "solution" / "solve.sh").write_text(
        "#!/bin/bash\necho 42 > /app/answer.txt\necho agent > /app/other.txt\n"
    )
    task = load_task(task.folder)
    policies = Policies("oracle")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.error is None, traj.score
    assert traj.reward == 1.0, traj.score


@pytest.mark.no_docker
def test_the_container_layer_is_read_as_the_engine_diffs_it_and_no_link_is_followed(
    tmp_path: Path,
) -> None:
    upper, lower, host = tmp_path / "upper", tmp_path / "lower", tmp_path / "host"
    for folder in (upper / "usr/local/bin", lower / "usr/bin", upper / "usr/bin", host / "x"):
        folder.mkdir(parents=True)
    (lower / "usr/bin/python3").write_text("the image's")
    (upper / "usr/bin/python3").write_text("replaced")  # changed: the image has it
    (upper / "usr/local/bin/tool").write_text("new")  # added
    os.mknod(upper / "usr/bin/gone", stat.S_IFCHR, 0)  # a whiteout: removed
    (host / "x" / "secret").write_text("the host's")
    (upper / "lib").symlink_to(host)  # a link in the layer leads nowhere on the host
    (upper / "usr/local/bin/lnk").symlink_to(host / "x")
    found = sorted(_upper_changes(str(upper), [str(lower)]) or [])
    assert ("changed", "/usr/bin/python3") in found and ("added", "/usr/local/bin/tool") in found
    assert ("removed", "/usr/bin/gone") in found
    assert not any("secret" in path for _, path in found), found
    assert findings(found) == [
        "/usr/bin/gone removed",
        "/usr/bin/python3 changed",
        "/usr/local/bin/lnk added",
        "/usr/local/bin/tool added",
    ]
