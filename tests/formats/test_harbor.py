"""Harbor tasks run as they are: folders written here in Harbor's format (FROM the offline
base image), through the one episode lifecycle, with Harbor's semantics kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentenv.errors import TaskError
from agentenv.runner.episode import run_task
from agentenv.runner.policy import Policies
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task, load_tasks

pytestmark = pytest.mark.anyio

TOML = """\
version = "1.0"

[metadata]
author_name = "agentenv tests"
difficulty = "easy"
category = "programming"
tags = ["harbor", "trivial"]

[verifier]
timeout_sec = {verifier_timeout}

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024
storage_mb = 2048
{extra}
"""


def harbor_task(
    root: Path,
    name: str,
    *,
    test: str,
    solve: str = "echo hello > /app/out.txt\n",
    verifier_timeout: float = 60.0,
    extra: str = "",
    toml: str | None = None,
) -> Path:
    folder = root / name
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "solution").mkdir()
    (folder / "task.toml").write_text(
        toml or TOML.format(verifier_timeout=verifier_timeout, extra=extra)
    )
    (folder / "instruction.md").write_text("Write hello to /app/out.txt.\n")
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nWORKDIR /app\nRUN echo 'given' > /app/input.txt\n"
    )
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\n" + textwrap.dedent(test))
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve)
    return folder


NUMERIC = """\
if [ "$(cat /app/out.txt 2>/dev/null)" = hello ] && [ "$(cat /app/input.txt)" = given ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


async def _run(
    folder: Path, policy: str = "oracle", backend: str | None = None
) -> tuple[float, list[str]]:
    task = load_task(folder)
    policies = Policies(policy)
    try:
        traj, _ = await run_task(task, policies.for_task(task), backend=backend)
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.error is None, traj.score
    return traj.reward or 0.0, [f"{c.name}:{c.score}:{c.detail}" for c in traj.score.checks]


async def test_numeric_reward_oracle_and_null(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "hello", test=NUMERIC)
    task = load_task(folder)
    assert task.verify_in == "final" and task.workdir == "/app" and task.network == "none"
    assert task.memory == 1024 << 20 and task.disk == 2048 << 20
    assert set(task.tags) >= {"harbor", "trivial", "programming"}
    assert (await _run(folder, "oracle"))[0] == 1.0
    assert (await _run(folder, "null"))[0] == 0.0


SHARED = '[verifier]\nenvironment_mode = "shared"\n'


def shared(toml: str | None = None) -> str:
    """A task.toml asking for Harbor's shared mode (test.sh in the agent's own sandbox)."""
    return (toml or TOML.format(verifier_timeout=60.0, extra="")).replace("[verifier]\n", SHARED)


async def _verifier_error(folder: Path) -> str:
    """The verifier error an oracle run of ``folder`` ends in (with test.sh's output)."""
    task = load_task(folder)
    policies = Policies("oracle")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.error is not None, traj.score
    assert traj.reward is None
    return " ".join(c.detail for c in traj.score.checks)


async def test_json_rewards_are_named_and_reward_is_the_score(tmp_path: Path) -> None:
    test = """\
    echo '{"reward": 0.5, "style": 1, "speed": 0}' > /logs/verifier/reward.json
    """
    reward, checks = await _run(harbor_task(tmp_path, "named", test=test))
    assert reward == 0.5
    assert [c.split(":")[:2] for c in checks] == [
        ["reward", "0.5"],
        ["style", "1.0"],
        ["speed", "0.0"],
    ]


async def test_no_reward_file_or_a_timeout_is_an_error_a_planted_reward_zero(
    tmp_path: Path,
) -> None:
    # as Harbor reads them: no reward file, an unreadable one or a timeout is a verifier
    # error (not a 0), with test.sh's output kept
    silent = harbor_task(tmp_path, "silent", test="echo ran\n")
    said = await _verifier_error(silent)
    assert "wrote no /logs/verifier/reward.json nor reward.txt" in said and "ran" in said
    slow = harbor_task(tmp_path, "slow", test="sleep 30\n", verifier_timeout=2)
    assert "timed out after 2 s" in await _verifier_error(slow)
    # a reward file the runner will not take into memory whole, nor follow as a link
    huge = harbor_task(
        tmp_path,
        "huge",
        test="head -c 5000000 /dev/zero | tr '\\0' 1 > /logs/verifier/reward.txt\n",
    )
    assert "is larger than 1048576 bytes" in await _verifier_error(huge)
    linked = harbor_task(tmp_path, "linked", test="ln -s /etc/hostname /logs/verifier/reward.txt\n")
    assert "is not a regular file" in await _verifier_error(linked)
    # the agent writes the reward itself, and leaves a process that keeps writing it: the
    # folder is laid down fresh before test.sh, and test.sh's own answer is what counts
    # (this test.sh writes its 0 and stops when the work is not there)
    strict = (
        '[ "$(cat /app/out.txt 2>/dev/null)" = hello ] || '
        "{ echo 0 > /logs/verifier/reward.txt; exit 1; }\n"
        "echo 1 > /logs/verifier/reward.txt\n"
    )
    planted = harbor_task(
        tmp_path,
        "planted",
        test=strict,
        solve=(
            "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n"
            "echo '{\"reward\": 1}' > /logs/verifier/reward.json\n"
        ),
    )
    assert (await _run(planted))[0] == 0.0


async def test_resources_network_and_a_service_the_agent_left_running(tmp_path: Path) -> None:
    # Harbor's tests inspect system state: here a server the agent started must still
    # answer when test.sh runs, in the agent's own sandbox, with the task's limits
    solve = (
        "nohup python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 &\n"
        "echo hello > /app/out.txt\n"
    )
    test = """\
    mem=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null \
      || cat /sys/fs/cgroup/memory.max)
    nets=$(ls /sys/class/net | tr '\\n' ' ')
    for i in $(seq 50); do
      python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8123/out.txt')" \\
        2>/dev/null && served=yes && break
      sleep 0.1
    done
    echo "mem=$mem nets=$nets served=$served"
    if [ "$mem" = 536870912 ] && [ "$nets" = "lo " ] && [ "$served" = yes ]; then
      echo 1 > /logs/verifier/reward.txt
    else
      echo 0 > /logs/verifier/reward.txt
    fi
    """
    toml = TOML.format(verifier_timeout=60.0, extra="").replace(
        "memory_mb = 1024", 'memory = "512M"'
    )
    served = harbor_task(tmp_path, "served", test=test, solve=solve, toml=shared(toml))
    reward, checks = await _run(served)
    assert reward == 1.0, checks


def test_what_cannot_run_is_refused_naming_the_file(tmp_path: Path) -> None:
    compose = harbor_task(tmp_path, "compose", test=NUMERIC)
    (compose / "environment" / "docker-compose.yaml").write_text("services: {}\n")
    with pytest.raises(TaskError, match=r"docker-compose.yaml: services: must name at least"):
        load_task(compose)
    future = harbor_task(tmp_path, "future", test=NUMERIC, toml='schema_version = "9.0"\n')
    with pytest.raises(TaskError, match=r"task.toml: schema_version: '9.0' is not a Harbor"):
        load_task(future)
    no_tests = harbor_task(tmp_path, "no-tests", test=NUMERIC)
    (no_tests / "tests" / "test.sh").unlink()
    with pytest.raises(TaskError, match=r"tests/test.sh: not found"):
        load_task(no_tests)
    bad_size = harbor_task(
        tmp_path, "bad-size", test=NUMERIC, toml='version = "1.0"\n[environment]\nmemory = "lots"\n'
    )
    with pytest.raises(TaskError, match=r"environment.memory: 'lots' is not a size"):
        load_task(bad_size)


def test_schema_1_1_names_and_a_folder_of_them(tmp_path: Path) -> None:
    toml = (
        'schema_version = "1.1"\n[task]\nname = "acme/say-hello"\n'
        'description = "says hello"\nkeywords = ["greeting"]\n'
        "[verifier]\ntimeout_sec = 30.0\n[environment]\nallow_internet = true\n"
    )
    harbor_task(tmp_path / "set", "one", test=NUMERIC, toml=toml)
    (task,) = load_tasks([tmp_path / "set"])
    assert task.id == "say-hello" and task.description == "says hello"
    assert task.network == "bridge" and "greeting" in task.tags
    assert json.loads(task.model_dump_json())["verifier"]["kind"] == "harbor"


def test_workdir_takes_the_dockerfiles_env_and_arg_values(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "vars", test=NUMERIC)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(
        f"FROM {BASE_IMAGE}\nARG ROOT=/srv\nENV APP=app LOG_DIR /var/log\n"
        "WORKDIR ${ROOT}/$APP\nWORKDIR data\n"
    )
    assert load_task(folder).workdir == "/srv/app/data"
    dockerfile.write_text(f"FROM {BASE_IMAGE}\nWORKDIR $NOWHERE/app\n")
    with pytest.raises(TaskError, match=r"Dockerfile:2: WORKDIR uses \$NOWHERE"):
        load_task(folder)


async def test_a_fork_bomb_the_agent_left_is_its_zero_not_a_crash(tmp_path: Path) -> None:
    # the right answer, and processes that take every pid the sandbox may have and keep
    # retaking any that frees up: test.sh cannot start (or its commands cannot), and the
    # episode is graded 0, not an error (the sandbox is alive; what runs in it is the
    # agent's). A classic `f | f &` bomb is not used: its processes exit as fast as they
    # start, so whether test.sh gets a pid is a race and the grade with it.
    hold = (
        "import os, time\n"
        "held = 0\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.execv('/bin/sleep', ['sleep', '3600'])\n"
        "        held += 1\n"
        "    except OSError:\n"
        "        if held and not os.path.exists('/tmp/full'):\n"
        "            open('/tmp/full', 'w').close()\n"
        "        time.sleep(0.01)\n"
    )
    solve = (
        "echo hello > /app/out.txt\n"
        f"cat > /tmp/hold.py <<'EOF'\n{hold}EOF\n"
        "nohup python3 /tmp/hold.py >/dev/null 2>&1 &\n"
        # bash builtins only from here: no fork is needed to wait for the pids to run out
        "while [ ! -e /tmp/full ]; do :; done\n"
    )
    # by default test.sh runs where none of the agent's processes are: the work is right
    assert (await _run(harbor_task(tmp_path, "bomb", test=NUMERIC, solve=solve)))[0] == 1.0
    # in Harbor's shared mode (opt-in) the bomb is alive when test.sh runs
    bomb = harbor_task(tmp_path, "shared-bomb", test=NUMERIC, solve=solve, toml=shared())
    reward, checks = await _run(bomb)
    assert reward == 0.0, checks
    # graded 0 because the pids ran out, not by some other failure: the executor's own
    # fork failed (EAGAIN), or it got a pid the hold had not retaken yet and the shell's
    # fork failed (dash's words for the same EAGAIN)
    said = " ".join(checks)
    assert "Resource temporarily unavailable" in said or "Cannot fork" in said, checks


BAD_FIELDS = """\
version = "1.0"
[agent]
timeout_sec = "soon"
[verifier]
env = "PATH=/bin"
[metadata]
tags = "easy"
[environment]
cpus = "two"
memory_mb = "lots"
allow_internet = "no"
"""


@pytest.mark.no_docker
def test_bad_fields_are_named_with_the_file_by_every_command(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "bad-numbers", test=NUMERIC, toml=BAD_FIELDS)
    spec = folder / "task.toml"
    env = {**os.environ, "COLUMNS": "200"}
    for args in (
        ["eval", str(folder), "--model", "oracle", "--out", str(tmp_path / "job")],
        ["run", str(folder), "--model", "oracle"],
        ["validate", str(folder)],
    ):
        argv = [sys.executable, "-m", "agentenv", *args]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        for field, value in (
            ("environment.cpus", "'two'"),
            ("environment.memory_mb", "'lots'"),
            ("environment.allow_internet", "'no'"),
            ("agent.timeout_sec", "'soon'"),
            ("verifier.env", "must be a table"),
            ("metadata.tags", "'easy'"),
        ):
            assert f"{spec}: {field}: " in done.stderr and value in done.stderr, (
                field,
                done.stderr,
            )
    assert not (tmp_path / "job").exists()


@pytest.mark.no_docker
def test_a_value_agentenv_refuses_names_the_harbor_field(tmp_path: Path) -> None:
    toml = 'version = "1.0"\n[environment]\ncpus = 65\n'
    folder = harbor_task(tmp_path, "many-cpus", test=NUMERIC, toml=toml)
    with pytest.raises(TaskError, match=r"task\.toml: environment\.cpus: Input should be less"):
        load_task(folder)
