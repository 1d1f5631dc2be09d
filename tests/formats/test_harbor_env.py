"""What a Harbor task asks of its environment beyond the image, run as Harbor runs it:
``[environment.env]`` (``${VAR:-default}`` resolved from the host at load) in the agent's
commands and test.sh, ``[solution].env`` in the oracle's solve.sh only, a ``healthcheck``
that must pass before the agent gets the sandbox (one that never passes an infrastructure
error naming the task and its last output), and
``[agent] user`` given as a name. Each task mirrors a kind of real one (the cookbook's
``multi-step`` sets ``[environment.env]``; services that take a while to come up are what
healthchecks are for)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentenv.errors import SandboxError, TaskError
from agentenv.runner.episode import prepare, release, run_task
from agentenv.runner.healthcheck import HealthcheckFailed, wait_healthy
from agentenv.runner.policy import Policies
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.sandbox.protocol import ExecResult
from agentenv.tasks import Healthcheck, load_task
from tests.formats.test_harbor import _run, harbor_task

pytestmark = pytest.mark.anyio

REWARD = """\
if {cond}; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

ENV_TOML = """\
[environment.env]
GREETING = "${H31_GREETING:-hi}"
PLAIN = "as written"

[solution]
env = { SECRET = "s3" }
"""


async def test_environment_env_reaches_the_agent_and_test_sh_solution_env_the_oracle_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("H31_GREETING", "howdy")
    solve = 'echo "$GREETING|$PLAIN|$SECRET" > /app/out.txt\n'
    cond = (
        '[ "$(cat /app/out.txt)" = "howdy|as written|s3" ] && [ "$GREETING" = howdy ] '
        '&& [ -z "$SECRET" ]'
    )
    folder = harbor_task(tmp_path, "env", test=REWARD.format(cond=cond), solve=solve, extra="")
    with (folder / "task.toml").open("a") as toml:
        toml.write(ENV_TOML)
    task = load_task(folder)  # was refused: "environment.env ... not supported yet"
    assert task.env == {"GREETING": "howdy", "PLAIN": "as written"}
    assert task.solution_env == {"SECRET": "s3"}
    assert task.verifier is not None and task.verifier.env["GREETING"] == "howdy"  # type: ignore[union-attr]
    reward, checks = await _run(folder, "oracle")
    assert reward == 1.0, checks
    assert (await _run(folder, "null"))[0] == 0.0


def test_an_unset_variable_without_default_is_refused_naming_it(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "unset", test="exit 0\n")
    with (folder / "task.toml").open("a") as toml:
        toml.write('[environment.env]\nTOKEN = "${H31_SURELY_UNSET_VAR}"\n')
    with pytest.raises(TaskError, match=r"environment\.env\.TOKEN.*H31_SURELY_UNSET_VAR"):
        load_task(folder)


# an image whose service comes up a while after the container starts (a database, a gateway)
SLOW_ENTRY = """#!/bin/sh
(sleep 3; echo up > /srv/ready) &
exec "$@"
"""

SLOW_DOCKERFILE = f"""FROM {BASE_IMAGE}
COPY entry.sh /usr/local/bin/entry.sh
RUN chmod 0755 /usr/local/bin/entry.sh && mkdir -p /srv
WORKDIR /app
ENTRYPOINT ["/usr/local/bin/entry.sh"]
"""


def _slow_service(tmp_path: Path, name: str, healthcheck: str) -> Path:
    solve = "cat /srv/ready > /app/out.txt\n"  # the agent's first command asks the service
    cond = '[ "$(cat /app/out.txt 2>/dev/null)" = up ]'
    folder = harbor_task(tmp_path, name, test=REWARD.format(cond=cond), solve=solve)
    (folder / "environment" / "entry.sh").write_text(SLOW_ENTRY)
    (folder / "environment" / "Dockerfile").write_text(SLOW_DOCKERFILE)
    with (folder / "task.toml").open("a") as toml:
        toml.write(healthcheck)
    return folder


async def test_the_agent_starts_once_the_healthcheck_passes(tmp_path: Path) -> None:
    folder = _slow_service(
        tmp_path,
        "healthy",
        '[environment.healthcheck]\ncommand = "test -f /srv/ready"\n'
        "start_period_sec = 10\nstart_interval_sec = 0.5\ninterval_sec = 1\nretries = 3\n",
    )
    task = load_task(folder)  # was refused: "a healthcheck ... not supported yet"
    assert task.healthcheck is not None and task.healthcheck.start_period_s == 10
    reward, checks = await _run(folder, "oracle")
    assert reward == 1.0, checks  # without the wait, solve.sh ran before the service was up


async def test_a_healthcheck_that_never_passes_is_an_error_naming_the_task_not_a_hang(
    tmp_path: Path,
) -> None:
    folder = _slow_service(
        tmp_path,
        "never-healthy",
        '[environment.healthcheck]\ncommand = "echo still-down-$((40+2)); exit 3"\n'
        "interval_sec = 0.3\ntimeout_sec = 5\nretries = 3\n",
    )
    task = load_task(folder)
    policies = Policies("oracle")
    started = time.monotonic()
    try:
        with pytest.raises(SandboxError) as raised:
            await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    said = str(raised.value)
    assert isinstance(raised.value, HealthcheckFailed)
    assert "never-healthy" in said and "still-down-42" in said and "healthcheck" in said
    assert time.monotonic() - started < 60


class _Box:
    """Answers exec with the exit codes given, in turn (the rest: the last one)."""

    def __init__(self, codes: list[int]):
        self.codes, self.calls = codes, 0

    async def exec(self, cmd: object, **kwargs: object) -> ExecResult:
        code = self.codes[min(self.calls, len(self.codes) - 1)]
        self.calls += 1
        return ExecResult(exit_code=code, stdout_bytes=b"try %d\n" % self.calls)


async def test_failures_in_the_start_period_do_not_count_and_retries_bound_the_rest() -> None:
    # Harbor's semantics: the check fails at the retries-th failure in a row after the
    # start period; failures within the start period do not count
    three = Healthcheck(command="x", interval_s=0.01, start_interval_s=0.01, retries=3)
    box = _Box([1, 1, 0])
    await wait_healthy(box, three, task_id="t", workdir="/")  # type: ignore[arg-type]
    assert box.calls == 3
    two = three.model_copy(update={"retries": 2})
    failing = _Box([1, 1, 0])
    with pytest.raises(HealthcheckFailed, match="try 2"):
        await wait_healthy(failing, two, task_id="t", workdir="/")  # type: ignore[arg-type]
    assert failing.calls == 2
    grace = Healthcheck(
        command="x", interval_s=0.01, start_interval_s=0.01, start_period_s=0.5, retries=1
    )
    late = _Box([1] * 5 + [0])
    await wait_healthy(late, grace, task_id="t", workdir="/")  # type: ignore[arg-type]
    assert late.calls == 6


USER_DOCKERFILE = f"""FROM {BASE_IMAGE}
RUN useradd -m -u 1234 agent && mkdir /app && chown agent:agent /app
WORKDIR /app
"""


async def test_agent_user_given_as_a_name_is_the_images_user(tmp_path: Path) -> None:
    cond = '[ "$(cat /app/whoami.txt | tr "\\n" " ")" = "1234 agent " ]'
    folder = harbor_task(tmp_path, "named-user", test=REWARD.format(cond=cond))
    (folder / "environment" / "Dockerfile").write_text(USER_DOCKERFILE)
    text = (folder / "task.toml").read_text().replace("[agent]\n", '[agent]\nuser = "agent"\n')
    (folder / "task.toml").write_text(text)
    task = load_task(folder)  # was refused: "a user name is not supported yet"
    assert task.user == "agent"
    # the agent's own commands (the oracle's /solution needs root: the xfail in
    # test_harbor_image.py)
    policies = Policies("command:id -u > /app/whoami.txt && id -un >> /app/whoami.txt")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.reward == 1.0, traj.score


async def test_agent_user_the_image_lacks_is_refused_at_prepare_naming_the_field(
    tmp_path: Path,
) -> None:
    folder = harbor_task(tmp_path, "no-such-user", test="exit 0\n")
    text = (folder / "task.toml").read_text().replace("[agent]\n", '[agent]\nuser = "ghost"\n')
    (folder / "task.toml").write_text(text)
    task = load_task(folder)
    with pytest.raises(TaskError, match=r"agent\.user.*ghost"):
        prepared = await prepare(task)
        await release(prepared)
