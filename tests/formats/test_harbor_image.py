"""A Harbor task's image runs as Harbor runs it (``docs/harbor.md``): its ENTRYPOINT kept,
with the keep-alive as its command (Harbor replaces only the CMD, with ``sh -c "sleep
infinity"``), as the image's USER; the oracle finds ``solution/`` at ``/solution`` and runs
``solve.sh`` from there. Each task here mirrors a kind of real one: an image whose entrypoint
starts the service ``test.sh`` queries (a gateway, a database), a solve.sh that reads its
own files from ``/solution/``, an image with a ``USER`` of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.runner.episode import prepare, release, run_task, start_sandbox
from agentenv.runner.policy import Policies
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.tasks import load_task
from tests.formats.test_harbor import _run, harbor_task

pytestmark = pytest.mark.anyio

# what such images do: start the service, then run Harbor's command (its sleep)
ENTRY = """#!/bin/sh
mkdir -p /srv/site && echo gateway-ok > /srv/site/health
python3 -m http.server 8765 --bind 127.0.0.1 --directory /srv/site >/dev/null 2>&1 &
exec "$@"
"""

GATEWAY_DOCKERFILE = f"""FROM {BASE_IMAGE}
COPY entry.sh /usr/local/bin/entry.sh
RUN chmod 0755 /usr/local/bin/entry.sh
WORKDIR /app
ENTRYPOINT ["/usr/local/bin/entry.sh"]
"""

PROBE = """\
import time, urllib.request
for _ in range(50):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8765/health", timeout=2).read().decode())
        break
    except OSError:
        time.sleep(0.2)
"""

GATEWAY_TEST = f"""\
ok=$(python3 -c '{PROBE}')
echo "gateway said: $ok"
if [ "$ok" = gateway-ok ] && [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

OUT_IS_HELLO = """\
if [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


async def test_the_service_the_images_entrypoint_starts_is_up(tmp_path: Path) -> None:
    folder = harbor_task(tmp_path, "gateway", test=GATEWAY_TEST)
    (folder / "environment" / "entry.sh").write_text(ENTRY)
    (folder / "environment" / "Dockerfile").write_text(GATEWAY_DOCKERFILE)
    assert load_task(folder).image_entrypoint
    reward, checks = await _run(folder, "oracle")
    assert reward == 1.0, checks  # was 0: the keep-alive replaced the entrypoint
    assert (await _run(folder, "null"))[0] == 0.0


async def test_the_oracle_finds_its_files_at_slash_solution(tmp_path: Path) -> None:
    solve = (
        'cd "$(dirname "$0")" && [ "$PWD" = /solution ] '
        "&& cp /solution/data/answer.txt /app/out.txt\n"
    )
    folder = harbor_task(tmp_path, "solution-files", test=OUT_IS_HELLO, solve=solve)
    (folder / "solution" / "data").mkdir()
    (folder / "solution" / "data" / "answer.txt").write_text("hello\n")
    reward, checks = await _run(folder, "oracle")
    assert reward == 1.0, checks  # was 0: solution/ was under /tmp/agentenv-solution


def _user_task(tmp_path: Path) -> Path:
    solve = "id -un > /app/whoami.txt && echo hello > /app/out.txt\n"
    test = """\
if [ "$(cat /app/whoami.txt)" = app ] && [ "$(stat -c %U /app/out.txt)" = app ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
    folder = harbor_task(tmp_path, "image-user", test=test, solve=solve)
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nRUN useradd -m app && mkdir /app && chown app:app /app\n"
        "USER app\nWORKDIR /app\n"
    )
    return folder


async def test_the_agent_runs_as_the_images_user(tmp_path: Path) -> None:
    task = load_task(_user_task(tmp_path))
    prepared = await prepare(task)
    try:
        async with await start_sandbox(prepared) as box:
            ran = await box.exec("id -un; pwd; touch mine && stat -c %U mine")
            assert ran.stdout.split() == ["app", "/app", "app"], ran
    finally:
        await release(prepared)


async def test_a_task_whose_image_has_a_user_of_its_own_is_graded(tmp_path: Path) -> None:
    # /solution is put in by root through the engine, as Harbor uploads it, and solve.sh
    # run as the image's USER (was: written by the oracle's tool calls as that user, who
    # may not write to /; the oracle's run failed and the task scored 0)
    reward, checks = await _run(_user_task(tmp_path), "oracle")
    assert reward == 1.0, checks


@pytest.mark.parametrize("verifier_user", [None, "root"])
async def test_a_task_whose_image_has_a_user_of_its_own_is_verified_as_harbor_does(
    tmp_path: Path, verifier_user: str | None
) -> None:
    # /tests and /logs/verifier are laid out by root, as Harbor copies them in; test.sh runs
    # as the image's USER, or as [verifier] user when the task names one
    folder = _user_task(tmp_path)
    test = folder / "tests" / "test.sh"
    test.write_text(
        test.read_text().replace("if [", f'if [ "$(id -un)" = {verifier_user or "app"} ] && [', 1)
    )
    if verifier_user:
        toml = folder / "task.toml"
        toml.write_text(
            toml.read_text().replace("[verifier]\n", f'[verifier]\nuser = "{verifier_user}"\n')
        )
    task = load_task(folder)
    policies = Policies("command:id -un > /app/whoami.txt && echo hello > /app/out.txt")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.reward == 1.0, traj.score  # was a layout error
    assert traj.score.suspicious == [], traj.score.suspicious  # the engine's init is not a change


async def test_a_workdir_the_image_lacks_is_where_everything_runs(tmp_path: Path) -> None:
    # [environment] workdir (mapped to Task.workdir at load) naming a folder the image has not
    solve = "pwd > where.txt\n"
    test = """\
if [ "$(pwd)" = /srv/job ] && [ "$(cat /srv/job/where.txt)" = /srv/job ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
    folder = harbor_task(tmp_path, "workdir", test=test, solve=solve)
    task = load_task(folder).model_copy(update={"workdir": "/srv/job"})
    policies = Policies("oracle")
    try:
        traj, _ = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.reward == 1.0, traj.score
