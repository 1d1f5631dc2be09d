"""A harness that crashes, hangs, floods its output or goes over budget is that episode's
outcome (in HarnessRun), never an exception; what it left running is gone after."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.agent.trajectory import Limits
from agentenv.harnesses.run import run_harness
from agentenv.sandbox.images import BASE_IMAGE
from agentenv.testing import ScriptedTurn
from tests.harnesses.conftest import INSTRUCTION, episode, scripted, tool

pytestmark = [pytest.mark.anyio, pytest.mark.on_docker]

ONE_TURN = [ScriptedTurn(reasoning="Look.", tool_calls=[tool("bash", command="ls")])]

# two chat calls through the relay, as a harness would make them (stdlib only)
CALL_TWICE = """
import json, sys, time, urllib.request, urllib.error
url, token = sys.argv[1] + "/v1/chat/completions", sys.argv[2]
body = json.dumps({"model": "kimi-k3", "messages": [{"role": "user", "content": "hi"}]})
for i in range(2):
    req = urllib.request.Request(url, body.encode(), {"Authorization": "Bearer " + token,
                                                     "Content-Type": "application/json"})
    try:
        print(i, urllib.request.urlopen(req, timeout=60).status, flush=True)
    except urllib.error.HTTPError as e:
        print(i, e.code, e.read()[:200], flush=True)
time.sleep(1000)
"""


async def test_a_crash_is_its_exit_code(socket_dir: Path) -> None:
    harness = scripted("sh", "-c", "echo about to die; kill -SEGV $$")
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir) as (box, gateway, _, _):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=60)
    assert run.stopped == "crashed"
    assert run.exit_code == 128 + 11
    assert "about to die" in run.log


async def test_a_missing_program_is_a_crash(socket_dir: Path) -> None:
    harness = scripted("/opt/agentenv-harness/nothing/bin/agent")
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir) as (box, gateway, _, _):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=60)
    assert run.stopped == "crashed"
    assert run.exit_code == 127
    assert "cannot start" in run.log


async def test_a_hang_is_stopped_at_the_timeout_with_its_children(socket_dir: Path) -> None:
    harness = scripted("sh", "-c", "sleep 1001 & sleep 1002; wait")
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir) as (box, gateway, _, _):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=3)
        left = await box.exec(["sh", "-c", "ps -eo args | grep -c '[s]leep 100'"])
    assert run.stopped == "timeout"
    assert run.exit_code is None
    assert left.stdout.strip() == "0"


async def test_a_flood_is_stopped_and_its_log_capped(socket_dir: Path) -> None:
    harness = scripted("sh", "-c", "yes flooding")
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir) as (box, gateway, _, _):
        run = await run_harness(
            box, harness, INSTRUCTION, gateway, timeout_s=120, max_log_bytes=200_000
        )
        left = await box.exec(["sh", "-c", "ps -eo args | grep -c '[y]es flooding'"])
    assert run.stopped == "output_flood"
    assert "flooding" in run.log
    assert len(run.log) <= 64 << 10
    assert left.stdout.strip() == "0"


async def test_over_budget_the_call_is_refused_and_the_harness_stopped(socket_dir: Path) -> None:
    harness = scripted("python3", "-c", CALL_TWICE, "{base_url}", "{token}")
    limits = Limits(max_turns=1)
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir, limits=limits) as (
        box,
        gateway,
        trajectory,
        _,
    ):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=120)
    assert run.stopped == "budget", run.log
    assert run.exit_code is None
    assert "0 200" in run.log  # the first call went through the relay and was answered
    assert len(trajectory.turns) == 1
    assert trajectory.stop_reason == "max_turns"


async def test_a_killed_supervisor_ends_the_run_and_its_group(socket_dir: Path) -> None:
    # the agent (same user) kills the relay that supervises it: no status is ever written
    harness = scripted("sh", "-c", "kill -9 $PPID; sleep 1003")
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir) as (box, gateway, _, _):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=600)
        left = await box.exec(["sh", "-c", "ps -eo args | grep -c '[s]leep 1003'"])
    assert run.stopped == "crashed"  # not "timeout": it did not wait out the clock
    assert "left no status" in run.log
    assert left.stdout.strip() == "0"


async def test_a_timeout_passing_while_a_model_call_holds_the_sandbox_frozen(
    socket_dir: Path,
) -> None:
    # the call takes 20 s, frozen; the harness's 2 s run out meanwhile: the episode ends as a
    # timeout once the call is answered, and nothing is raised (an exec timeout of 2 s would
    # have its host-side guard, 2 + 15 s, fire while the executor is frozen)
    harness = scripted("python3", "-c", CALL_TWICE, "{base_url}", "{token}")
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir, ttft_s=20.0) as (box, gateway, traj, _):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=2)
    assert run.stopped == "timeout", run.log
    assert traj.turns and traj.turns[0].paused_s > 0


async def test_a_daemon_holding_its_output_open_does_not_keep_it_running(
    socket_dir: Path,
) -> None:
    # the harness leaves a process outside its group holding its stdout, then exits 0
    harness = scripted("sh", "-c", "setsid sleep 1004 & sleep 0.5; echo done; exit 0")
    async with episode(BASE_IMAGE, ONE_TURN, socket_dir) as (box, gateway, _, _):
        run = await run_harness(box, harness, INSTRUCTION, gateway, timeout_s=60)
    assert run.stopped is None, run.log  # not "timeout": its end was seen when it exited
    assert run.exit_code == 0
    assert "done" in run.log
