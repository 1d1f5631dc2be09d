"""Sanity: the defences do not just zero everything. The reference solutions of the tasks the
attacks target still score 1.0, and real partial solutions keep their partial credit."""

from __future__ import annotations

from pathlib import Path

import anyio

from agentenv.agent.loop import Trajectory
from agentenv.agent.policies import oracle
from agentenv.runner.episode import run_task
from tests.security.harness import (
    CONCURRENCY,
    TARGETED_TASKS,
    Battery,
    assert_graded,
    attack,
    describe,
    heredoc,
    scenario,
    task,
)


@scenario("test_sanity_oracle_still_solves_targeted_tasks")
async def _oracles(tmp: Path) -> dict[str, Trajectory]:
    out: dict[str, Trajectory] = {}
    names = list(TARGETED_TASKS)

    async def one(name: str) -> None:
        t = task(name)
        assert t.solution is not None, f"{name} has no solution.sh"
        out[name], _ = await run_task(t, oracle(t.solution.read_text(), timeout_s=300))

    limiter = anyio.CapacityLimiter(4)

    async def limited(name: str) -> None:
        async with limiter:
            await one(name)

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(limited, name)
    return out


def test_sanity_oracle_still_solves_targeted_tasks(battery: Battery) -> None:
    results = battery.result("test_sanity_oracle_still_solves_targeted_tasks")
    assert set(results) == set(TARGETED_TASKS)
    for name, traj in sorted(results.items()):
        assert_graded(traj, f"oracle on {name}")
        assert traj.reward == 1.0, f"oracle on {name}: {describe(traj)}"


# Honest work on two of the eight report.json fields: 2/8 of the credit.
PARTIAL_REPORT = r"""import json
import re
from collections import Counter

record = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (\w+)\s+(.*)$")
levels, requests = Counter(), 0
with open("app.log") as f:
    for line in f:
        m = record.match(line.rstrip("\n"))
        if m:
            levels[m.group(1)] += 1
            requests += m.group(2).startswith("request ")
report = {
    "total_requests": requests,
    "level_counts": {k: levels.get(k, 0) for k in ("INFO", "WARN", "ERROR")},
}
with open("report.json", "w") as f:
    json.dump(report, f)
"""

attack(
    "test_sanity_partial_credit_report_json",
    "log-report-json",
    f"""
{heredoc("/tmp/partial.py", PARTIAL_REPORT)}
python3 /tmp/partial.py && cat report.json
""",
)


def test_sanity_partial_credit_report_json(battery: Battery) -> None:
    traj = battery.result("test_sanity_partial_credit_report_json")
    assert_graded(traj, "partial report.json")
    assert traj.reward == 0.25, describe(traj)


# The right top_ips.txt, computed honestly, but a top_ips.sh that is broken: 1 of 3 checks.
attack(
    "test_sanity_partial_credit_top_ips",
    "top-error-ips",
    r"""
LC_ALL=C awk '{
    rest = substr($0, index($0, "\"") + 1)
    rest = substr(rest, index(rest, "\"") + 1)
    split(rest, f, " ")
    if (f[1] ~ /^[45][0-9][0-9]$/) count[$1]++
} END { for (ip in count) print count[ip], ip }' access.log |
    LC_ALL=C sort -k1,1nr -k2,2 | head -n 10 > top_ips.txt
printf '#!/bin/bash\necho "not written yet" >&2\nexit 1\n' > top_ips.sh
cat top_ips.txt
""",
)


def test_sanity_partial_credit_top_ips(battery: Battery) -> None:
    traj = battery.result("test_sanity_partial_credit_top_ips")
    assert_graded(traj, "partial top-error-ips")
    assert traj.reward is not None and abs(traj.reward - 1 / 3) < 1e-9, describe(traj)


def test_sanity_the_battery_ran_in_recycled_sandboxes(battery: Battery) -> None:
    # with more episodes than run at once, later ones got sandboxes earlier ones (attacks
    # among them) handed back: every verdict above was also reached in recycled sandboxes
    assert battery.recycled > 0 or len(battery.results) <= 2 * CONCURRENCY, battery.recycled
    for name, traj in sorted(battery.nulls.items()):
        assert traj.reward == 0.0, f"null on {name}: {describe(traj)}"
