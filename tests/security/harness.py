"""The hostile-agent harness: attacks registered by name, run through the real loop and the
real verifiers, all at once (a session fixture, see ``conftest.py``), then judged one per test.

An *attack* is an agent that never solves its task: its single tool call runs a bash script
(the ``oracle`` policy with the script as its "solution") that tries to raise its reward or
to turn its 0 into an ungraded or errored episode. The right outcome for every attack is the
same: the episode is graded (the verifier ran, ``score.error is None``) and its reward is the
null policy's reward for that task.

Scripts run inside sandboxes without network; each is bounded in time (the bash call's
timeout, loops with deadlines) and size (at most about 1 GB written), and tolerates its own
failures (``|| true``): under the defences most of them cannot even write where they aim.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import anyio

from agentenv.agent.loop import Limits, Trajectory
from agentenv.agent.policies import ScriptedModel, null, oracle
from agentenv.model.types import Completion, ToolCall
from agentenv.runner.episode import run_task
from agentenv.sandbox import recycling
from agentenv.tasks import Task, load_task

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"
LIMITS = Limits(max_turns=3)  # no policy here takes more than three turns
SCRIPT_TIMEOUT_S = 120.0  # the attack's bash call
SCENARIO_TIMEOUT_S = float(os.environ.get("AGENTENV_SECURITY_SCENARIO_TIMEOUT", "420"))
# Every bundled task an attack here targets (the sanity test runs their oracles).
TARGETED_TASKS = (
    "clean-customer-csv",
    "config-validator",
    "duration-parser",
    "fix-c-wordfreq",
    "fix-interval-merge",
    "fix-makefile-deps",
    "log-report-json",
    "rename-pricing-module",
    "sqlite-revenue-queries",
    "temperature-chart",
    "text-stats",
    "top-error-ips",
    "trace-missing-vat",
)
SLOW_TASKS = ("duration-parser",)  # its verifier makes hundreds of calls: start its attacks first
CONCURRENCY = int(os.environ.get("AGENTENV_SECURITY_CONCURRENCY", "6"))

# A JUnit report in which every test passed: what a forger writes wherever it can.
FAKE_JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
    'failures="0" skipped="0" tests="3" time="0.1">'
    '<testcase classname="forged" name="a" time="0.0"/>'
    '<testcase classname="forged" name="b" time="0.0"/>'
    '<testcase classname="forged" name="c" time="0.0"/>'
    "</testsuite></testsuites>"
)

# Python that, loaded into the verifier's own programs (by a .pth file, sitecustomize,
# usercustomize, a shadowing module...), makes each of them report success: the hidden
# pytest run ends with a forged JUnit report, reports are read back forged, command checks
# exit 0, the PNG checker says ok, and the agent's processes are never stopped.
PAYLOAD_PY = f'''"""agentenv cheat payload: rewrites what the verifier reports."""
import os
import sys

FAKE = {FAKE_JUNIT!r}


def _argv():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\\0") if a]
    except OSError:
        return list(getattr(sys, "argv", []) or [])


def _cheat():
    argv = _argv()
    line = " ".join(argv)
    if "stop_agent.py" in line:
        os._exit(0)
    if "png_check.py" in line:
        os.write(1, b'{{"ok": true, "detail": "fine"}}\\n')
        os._exit(0)
    if "read_capped.py" in line and any(a.endswith(".xml") for a in argv):
        os.write(1, FAKE.encode())
        os._exit(0)
    if "compare_csv.py" in line or "check_chart.py" in line:
        os._exit(0)
    if "run_pytest.py" in line:
        i = [k for k, a in enumerate(argv) if a.endswith("run_pytest.py")][0]
        junit = argv[i + 2] if len(argv) > i + 2 else None
        import atexit

        def forge():
            if junit:
                try:
                    with open(junit, "w") as f:
                        f.write(FAKE)
                except OSError:
                    pass

        atexit.register(forge)


try:
    _cheat()
except Exception:
    pass
'''


def heredoc(path: str, text: str, tag: str = "AGENTENV_EOF") -> str:
    """A bash snippet writing ``text`` to ``path`` (quoted heredoc: no expansion)."""
    assert tag not in text
    return f"cat > {path} <<'{tag}'\n{text.rstrip()}\n{tag}\n"


# -- scenarios -----------------------------------------------------------------------------


@dataclass
class Scenario:
    """Something to run before the tests judge it: ``run(tmp)`` returns what the test
    inspects. ``tasks`` are the bundled tasks whose null reward the test compares with."""

    name: str
    tasks: tuple[str, ...]
    run: Callable[[Path], Awaitable[Any]]
    slow: bool = False  # started first, so that the battery ends sooner


SCENARIOS: dict[str, Scenario] = {}


def register(
    name: str, tasks: tuple[str, ...], run: Callable[[Path], Awaitable[Any]], *, slow: bool
) -> None:
    assert name.startswith("test_"), name
    assert name not in SCENARIOS, f"{name} registered twice"
    assert set(tasks) <= set(TARGETED_TASKS), f"{name}: add its task to TARGETED_TASKS"
    SCENARIOS[name] = Scenario(name, tasks, run, slow or bool(set(tasks) & set(SLOW_TASKS)))


def scenario(name: str, *tasks: str) -> Callable[[Callable[[Path], Awaitable[Any]]], Any]:
    """Register a custom scenario (an ``async def f(tmp_path)``, usually several episodes)
    under a test's name."""

    def deco(fn: Callable[[Path], Awaitable[Any]]) -> Callable[[Path], Awaitable[Any]]:
        register(name, tasks, fn, slow=True)
        return fn

    return deco


@cache
def task(name: str) -> Task:
    """A bundled task, with small limits (every policy here takes one turn)."""
    return load_task(ENVIRONMENTS / name).model_copy(update={"limits": LIMITS})


def cheat_policy(script: str, tmp: Path, label: str = "attack") -> Any:
    """The oracle policy running ``script`` (kept in ``tmp`` to read after a failure)."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / f"{label}.sh"
    path.write_text(script)
    return oracle(path.read_text(), timeout_s=SCRIPT_TIMEOUT_S)


async def run_attack(task_name: str, script: str, tmp: Path) -> Trajectory:
    traj, _ = await run_task(task(task_name), cheat_policy(script, tmp))
    return traj


def scripted_turns(*commands: str) -> ScriptedModel:
    """A policy taking one turn per bash command, in order, then submitting."""
    turns = [
        Completion(
            content=f"step {i}",
            finish_reason="tool_calls",
            tool_calls=[
                ToolCall(
                    id=f"functions.bash:{i}",
                    name="bash",
                    arguments=json.dumps({"command": cmd, "timeout": SCRIPT_TIMEOUT_S}),
                )
            ],
        )
        for i, cmd in enumerate(commands)
    ]
    done = ToolCall(id=f"functions.submit:{len(commands)}", name="submit", arguments="{}")
    turns.append(Completion(content="done", finish_reason="tool_calls", tool_calls=[done]))
    return ScriptedModel(turns, "attack")


def attack(name: str, task_name: str, script: str, *, slow: bool = False) -> None:
    """Register ``script`` as the attack judged by the test called ``name``."""
    script = "#!/bin/bash\n# attack: " + name + "\n" + script + "\ntrue\n"

    async def run(tmp: Path) -> Trajectory:
        return await run_attack(task_name, script, tmp)

    register(name, (task_name,), run, slow=slow)


def first_cheats(script: str, tmp: Path) -> Callable[[Task], Any]:
    """A policy function for groups and streams: the first episode runs ``script``, every
    other one is ``null()``."""
    calls = {"n": 0}

    def policy(_task: Task) -> Any:
        calls["n"] += 1
        return cheat_policy(script, tmp, "cheater") if calls["n"] == 1 else null()

    return policy


def is_cheater(traj: Trajectory) -> bool:
    """Whether ``traj`` was played by the attack (the null policy calls no tool)."""
    return any(t.completion.tool_calls for t in traj.turns)


# -- the battery ---------------------------------------------------------------------------


@dataclass
class Battery:
    """The results of every selected scenario and the null rewards of their tasks."""

    results: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    nulls: dict[str, Trajectory] = field(default_factory=dict)
    null_errors: dict[str, str] = field(default_factory=dict)
    recycled: int = 0  # episodes whose sandbox had served an earlier one

    def result(self, name: str) -> Any:
        if name in self.errors:
            raise AssertionError(f"{name} crashed instead of being graded:\n{self.errors[name]}")
        assert name in self.results, f"{name} was not run (is it registered?)"
        return self.results[name]

    def null_reward(self, task_name: str) -> float:
        """The null policy's reward on ``task_name`` (graded, or the test fails)."""
        if task_name in self.null_errors:
            raise AssertionError(f"null on {task_name} crashed:\n{self.null_errors[task_name]}")
        traj = self.nulls[task_name]
        assert_graded(traj, f"null on {task_name}")
        assert traj.reward is not None
        return traj.reward

    def tally(self) -> str:
        """One line for a note: scenarios run, and how many raised a reward above the null
        policy's, ended in an error (infrastructure or verifier) or were flagged."""
        raised = errored = flagged = 0
        for name in self.results.keys() | self.errors.keys():
            episodes = list(_episodes(self.results.get(name)))
            if name in self.errors or any(e is None for e, _ in episodes):
                errored += 1
                continue
            facts = list(_facts(episodes))
            nulls = {t: n.reward or 0.0 for t, n in self.nulls.items()}
            raised += any(r is not None and r > nulls.get(t, 0.0) for t, r, _ in facts)
            flagged += any(flags for *_, flags in facts)
        total = len(self.results.keys() | self.errors.keys())
        return (
            f"{total} attack scenarios: {raised} raised the reward above the null policy's, "
            f"{errored} ended in an error, {flagged} flagged"
        )

    def summary(self) -> str:
        lines = [self.tally()]
        for name in sorted(self.results.keys() | self.errors.keys()):
            lines.append(f"== {name} ({self.seconds.get(name, 0):.1f} s)")
            if name in self.errors:
                lines.append(self.errors[name][-800:])
                continue
            lines.extend(_describe_any(self.results[name]))
        for name, traj in sorted(self.nulls.items()):
            lines.append(f"== null on {name}: reward {traj.reward}")
        return "\n".join(lines) + "\n"

    def assert_null(self, name: str) -> None:
        """The attack called ``name`` was graded and earned what doing nothing earns."""
        traj = self.result(name)
        (task_name,) = SCENARIOS[name].tasks
        assert_graded(traj, name)
        expected = self.null_reward(task_name)
        assert traj.reward == expected, (
            f"{name}: reward raised to {traj.reward} (null gets {expected}): {describe(traj)}"
        )


async def run_battery(names: list[str], tmp_root: Path) -> Battery:
    """Run the named scenarios and the null policy on their tasks, concurrently."""
    battery = Battery()
    limiter = anyio.CapacityLimiter(CONCURRENCY)
    tasks = sorted({t for n in names for t in SCENARIOS[n].tasks})

    async def one_null(task_name: str) -> None:
        async with limiter:
            try:
                with anyio.fail_after(SCENARIO_TIMEOUT_S):
                    traj, _ = await run_task(task(task_name), null())
                battery.nulls[task_name] = traj
            except Exception:
                battery.null_errors[task_name] = traceback.format_exc()[-3000:]

    async def one(name: str) -> None:
        tmp = tmp_root / name
        tmp.mkdir(parents=True, exist_ok=True)
        async with limiter:
            started = time.monotonic()
            try:
                with anyio.fail_after(SCENARIO_TIMEOUT_S):
                    battery.results[name] = await SCENARIOS[name].run(tmp)
            except Exception:
                battery.errors[name] = traceback.format_exc()[-3000:]
            battery.seconds[name] = time.monotonic() - started

    # every episode hands its sandboxes back to one recycler: an attack's sandboxes, agent's
    # and checker's, serve later attacks, nulls and oracles on the same task, so each verdict
    # here is also a check that recycling leaves nothing an attack did behind
    async with recycling() as recycler, anyio.create_task_group() as tg:
        for t in tasks:
            tg.start_soon(one_null, t)
        for n in sorted(names, key=lambda n: not SCENARIOS[n].slow):
            tg.start_soon(one, n)
    battery.recycled = recycler.reused
    report = os.environ.get("AGENTENV_SECURITY_REPORT")
    if report:  # what each scenario did, for whoever reads the suite's failures
        Path(report).write_text(battery.summary())
    return battery


# -- judging -------------------------------------------------------------------------------


def describe(traj: Trajectory) -> str:
    """What went on, for an assertion message: error, reward, each check and its detail,
    and the attack's tool output."""
    parts = [f"error={traj.error!r}", f"stop={traj.stop_reason}"]
    score = traj.score
    if score is None:
        parts.append("score=None")
    else:
        parts.append(f"reward={score.reward} score.error={score.error!r}")
        for c in score.checks:
            parts.append(f"  [{c.score:.2f}] {c.name}: {c.detail[:300]!r}")
    for turn in traj.turns:
        for r in turn.tool_results:
            if r.name == "bash":
                parts.append(f"  bash output: {r.output[-600:]!r}")
    return "\n".join(parts)


def _episodes(found: Any) -> Iterator[tuple[Any, Any]]:
    """Each episode in a scenario's result: (its score, or None for an errored episode;
    the trajectory or result itself)."""
    if isinstance(found, Trajectory):
        graded = found.error is None and found.score is not None and found.score.error is None
        yield (found.score if graded else None), found
    elif isinstance(found, dict):
        for v in found.values():
            yield from _episodes(v)
    elif isinstance(found, list | tuple):
        for v in found:
            yield from _episodes(v)
    elif hasattr(found, "outcome"):  # an eval result
        yield (found.score if found.outcome == "graded" else None), found


def _facts(episodes: list[tuple[Any, Any]]) -> Iterator[tuple[str, float | None, list[str]]]:
    for score, one in episodes:
        yield str(getattr(one, "task_id", "")), score.reward, list(score.suspicious)


def _describe_any(found: Any, label: str = "") -> list[str]:
    if isinstance(found, Trajectory):
        return [f"-- {label or found.task_id}", describe(found)]
    if isinstance(found, dict):
        return [line for k, v in found.items() for line in _describe_any(v, str(k))]
    if isinstance(found, list | tuple):
        return [line for i, v in enumerate(found) for line in _describe_any(v, f"{label}[{i}]")]
    if hasattr(found, "outcome"):  # an eval result
        score = getattr(found, "score", None)
        checks = [(c.name, c.detail[:200]) for c in score.checks] if score else None
        return [f"-- {label}: {found.outcome} reward={found.reward} {found.error} {checks}"]
    return [f"-- {label}: {found!r}"[:1000]]


def assert_graded(traj: Trajectory, what: str) -> None:
    """The episode ran to a verdict: no infrastructure error, a score, no verifier error."""
    assert traj.error is None, f"{what}: the episode errored: {describe(traj)}"
    assert traj.score is not None, f"{what}: no score: {describe(traj)}"
    assert traj.score.error is None, f"{what}: the verifier errored: {describe(traj)}"
    assert traj.reward is not None, f"{what}: no reward: {describe(traj)}"
