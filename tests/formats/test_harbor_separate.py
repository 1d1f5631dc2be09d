"""A Harbor task's ``environment_mode = "separate"`` verifier in full: every key of
``[verifier.environment]`` honoured or refused by name, a verifier image built from
``tests/Dockerfile`` (context ``tests/``, tests bundled in it and not uploaded, as Harbor),
and the declared artifacts (a compose side service's too, ``exclude`` applied) the only
thing of the agent's the verifier gets. The tasks mirror Harbor's own separate-verifier
examples (a verifier image with pytest baked in, the agent's answer as an artifact), FROM
the offline base image.

The agent is an adversary: it links its declared answer to the answer key in ``/tests``
(which a verifier that followed the link would find equal), and leaves files outside the
artifacts and inside an excluded pattern: none of them reaches the verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.runner.episode import run_task
from agentenv.runner.policy import Policies
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import Task, load_task
from agentenv.verify.kinds.harbor import HarborCheck

pytestmark = pytest.mark.anyio


def _task(root: Path, name: str, toml: str, test: str, solve: str) -> Path:
    folder = root / name
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "environment" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nWORKDIR /app\n")
    (folder / "instruction.md").write_text("Write the answer to /app/answer.txt.\n")
    (folder / "task.toml").write_text('version = "1.0"\n' + toml)
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\n" + test)
    (folder / "tests" / "expected.txt").write_text("the key\n")
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    return folder


async def _oracle(task: Task) -> float:
    policies = Policies("oracle")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.error is None, traj.score
    return traj.reward


LINKED = """
artifacts = ["/app/answer.txt"]

[verifier]
timeout_sec = 60.0
environment_mode = "separate"
"""

COMPARE = """\
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat /tests/expected.txt)" ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


async def test_an_artifact_linked_to_the_answer_key_is_not_followed(tmp_path: Path) -> None:
    # the agent cannot read /tests, but a link to it carried into the verifier would read
    # the key there: the link is left out, so the answer is missing and scores 0
    solve = "ln -s /tests/expected.txt /app/answer.txt\n"
    task = load_task(_task(tmp_path, "linked", LINKED, COMPARE, solve))
    assert await _oracle(task) == 0.0


@pytest.mark.no_docker
def test_verifier_environment_keys_load_or_are_refused_by_name(tmp_path: Path) -> None:
    toml = LINKED + (
        "[verifier.environment]\n"
        'cpus = 0.5\nmemory_mb = 512\nstorage_mb = 1024\nworkdir = "/srv/check"\n'
        'build_timeout_sec = 120\nenv = { LEVEL = "${AGENTENV_UNSET_X:-deep}" }\n'
    )
    check = load_task(_task(tmp_path, "keys", toml, COMPARE, "")).verifier
    assert isinstance(check, HarborCheck)
    own = check.environment
    assert (own.cpus, own.memory, own.disk) == (0.5, 512 << 20, 1024 << 20)
    assert (own.workdir, own.build_timeout_s, own.bundled) == ("/srv/check", 120.0, False)
    assert check.env == {"LEVEL": "deep"}  # its own env, not the task's
    for line, field in {
        'network_mode = "open"': "verifier.environment.network_mode",  # not a mode
        "gpus = 1": "verifier.environment.gpus",
        'healthcheck = { command = "true" }': "verifier.environment.healthcheck",
        "memory_mb = -1": "verifier.environment.memory_mb",
    }.items():
        folder = _task(tmp_path, "bad", LINKED + f"[verifier.environment]\n{line}\n", COMPARE, "")
        with pytest.raises(TaskError) as e:
            load_task(folder)
        assert field in str(e.value), (line, str(e.value))
    image = LINKED + '[verifier.environment]\ndocker_image = "x/checker:1"\n'
    folder = _task(tmp_path, "img", image, COMPARE, "")
    (folder / "tests" / "test.sh").unlink()  # the image holds its tests, as in Harbor
    check = load_task(folder).verifier
    assert isinstance(check, HarborCheck)
    assert (check.image, check.environment.bundled) == ("x/checker:1", True)
    # a verifier image from tests/ (deep-swe's: FROM the task's image, its tests COPYed in)
    folder = _task(tmp_path, "built", LINKED, COMPARE, "")
    (folder / "tests" / "Dockerfile").write_text(f"FROM {BASE_IMAGE}\nCOPY test.sh /tests/\n")
    check = load_task(folder).verifier
    assert isinstance(check, HarborCheck)
    assert check.environment.model_dump(exclude_none=True) == {
        "dockerfile": "tests/Dockerfile",
        "bundled": True,  # no WORKDIR of its own: the task's workdir, as its base's
    }


DOCKERFILE = f"""\
FROM {BASE_IMAGE}
WORKDIR /srv/check
COPY verify.sh /tests/test.sh
COPY expected.txt /tests/
RUN echo baked > /srv/check/tool.txt
"""

COMPOSE = """\
services:
  main: {}
  db:
    image: agentenv/base:bookworm
    command:
      - sh
      - -c
      - mkdir -p /data; echo rows > /data/dump.txt; echo noise > /data/x.log; sleep infinity
"""

SEPARATE = """
artifacts = [
  "/app/answer.txt",
  { source = "/app/res", exclude = ["*.log"] },
  { source = "/data", service = "db", exclude = ["*.log"] },
]

[verifier]
timeout_sec = 60.0
environment_mode = "separate"

[verifier.environment]
cpus = 0.5
env = { LEVEL = "${AGENTENV_UNSET_X:-deep}" }
"""

# everything the verifier sees, as one line of reward 1 or 0 with what failed
FULL = """\
fail=""
[ "$(cat /app/answer.txt)" = "$(cat /tests/expected.txt)" ] || fail="$fail answer"
[ -f /app/res/kept.txt ] && [ ! -e /app/res/run.log ] || fail="$fail res-exclude"
[ "$(cat /data/dump.txt)" = rows ] && [ ! -e /data/x.log ] || fail="$fail db-artifact"
[ ! -e /app/planted.txt ] || fail="$fail planted"
[ ! -e /app/res/link ] || fail="$fail link"
[ "$LEVEL" = deep ] || fail="$fail env"
[ "$(pwd)" = /srv/check ] && [ "$(cat tool.txt)" = baked ] || fail="$fail image-workdir"
q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/cpu.max)
p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null || cut -d' ' -f2 /sys/fs/cgroup/cpu.max)
[ $((q * 2)) = "$p" ] || fail="$fail cpus:$q/$p"  # 0.5 of a core
echo "failed:$fail"
if [ -z "$fail" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""

HONEST = """\
echo "the key" > /app/answer.txt
mkdir -p /app/res && echo k > /app/res/kept.txt && echo n > /app/res/run.log
ln -s /tests /app/res/link
echo 1 > /app/planted.txt
"""


@pytest.mark.on_docker
async def test_a_verifier_image_from_tests_with_its_env_cpus_workdir_and_side_artifact(
    tmp_path: Path,
) -> None:
    # tests/test.sh would score 0: the image's own test.sh (verify.sh) must run, as Harbor
    # does not upload tests/ into a verifier image that holds them
    folder = _task(tmp_path, "full", SEPARATE, "echo 0 > /logs/verifier/reward.txt\n", HONEST)
    (folder / "tests" / "verify.sh").write_text("#!/bin/bash\n" + FULL)
    (folder / "tests" / "Dockerfile").write_text(DOCKERFILE)
    (folder / "environment" / "docker-compose.yaml").write_text(COMPOSE)
    task = load_task(folder)
    check = task.verifier
    assert isinstance(check, HarborCheck)
    assert (check.environment.dockerfile, check.environment.bundled) == ("tests/Dockerfile", True)
    assert check.environment.workdir == "/srv/check"  # the verifier image's WORKDIR
    policies = Policies("oracle")
    try:  # a compose task: on Docker whatever the suite's backend (Podman refuses compose)
        traj, _ = await run_task(task, policies.for_task(task), backend="docker")
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.error is None, traj.score
    assert traj.reward == 1.0, traj.score.checks[0].detail


STEPS = """\
schema_version = "1.1"
artifacts = ["/app/a.txt"]

[verifier]
timeout_sec = 60.0
environment_mode = "separate"

[verifier.environment]
env = { LEVEL = "task" }

[[steps]]
name = "one"

[[steps]]
name = "two"

[steps.verifier.environment]
workdir = "/srv/two"
env = { LEVEL = "two" }
"""

STEP_FILES = {
    "environment/Dockerfile": f"FROM {BASE_IMAGE}\nWORKDIR /app\n",
    "tests/test.sh": '[ "$LEVEL" = task ] && [ "$(cat /app/a.txt)" = one ] && r=1 || r=0\n'
    "echo $r > /logs/verifier/reward.txt\n",
    "steps/one/instruction.md": "Write one to /app/a.txt.\n",
    "steps/one/solution/solve.sh": "echo one > /app/a.txt\n",
    "steps/two/instruction.md": "Leave it.\n",
    "steps/two/solution/solve.sh": "echo two > /app/planted.txt\n",
    # the step's own verifier image, its tests bundled (steps/two/tests/test.sh is not
    # there: Harbor does not need it then)
    "steps/two/tests/Dockerfile": f"FROM {BASE_IMAGE}\nRUN mkdir -p /srv/two /tests\n"
    "COPY check.sh /tests/test.sh\n",
    "steps/two/tests/check.sh": "ok=1\n"
    '[ "$LEVEL" = two ] && [ "$(pwd)" = /srv/two ] || ok=0\n'
    '[ "$(cat /app/a.txt)" = one ] && [ ! -e /app/planted.txt ] || ok=0\n'
    'echo "level=$LEVEL pwd=$(pwd)"; echo $ok > /logs/verifier/reward.txt\n',
}


async def test_a_step_with_a_verifier_of_its_own(tmp_path: Path) -> None:
    folder = tmp_path / "steps-own"
    for name, text in {"task.toml": STEPS, **STEP_FILES}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    task = load_task(folder)
    assert task.multi_step is not None
    one, two = task.multi_step.steps
    assert one.verifier_environment is None  # the task's separate verifier
    assert two.verifier_environment is not None
    assert two.verifier_environment["environment"]["bundled"] is True
    policies = Policies("oracle")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.error is None, traj.score
    rewards = {s.name: s.reward for s in traj.score.steps}
    assert rewards == {"one": 1.0, "two": 1.0}, traj.score


@pytest.mark.no_docker
def test_a_step_graded_elsewhere_than_the_tasks_kind_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "steps-shared"
    toml = STEPS.replace(
        'name = "one"', 'name = "one"\n[steps.verifier]\nenvironment_mode = "shared"'
    )
    for name, text in {"task.toml": toml, **STEP_FILES}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    with pytest.raises(TaskError) as e:
        load_task(folder)
    assert "steps[0].verifier.environment_mode" in str(e.value)
