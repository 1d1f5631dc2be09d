"""A workspace with a 200 MB file goes through the whole lifecycle (prepare, the agent's
sandbox, its final state, a checker sandbox) without being held in memory: a runner's
memory must not grow with the size of a repo, times its concurrency."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

SIZE = 200 << 20
# generous: the lifecycle's own overhead is far below this, one copy of the file is not
MAX_GROWTH_MB = 120

pytestmark = pytest.mark.anyio

CHILD = r"""
import json, resource, sys
from pathlib import Path

import anyio

from agentenv.runner.episode import finish, prepare, release, start_sandbox, verify_final
from agentenv.tasks import load_task


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main() -> None:
    task = load_task(Path(sys.argv[1]))
    before = peak_mb()
    prepared = await prepare(task)
    try:
        async with await start_sandbox(prepared) as box:
            final = await finish(box, prepared)
        score = await verify_final(prepared, final)
    finally:
        await release(prepared)
    print(json.dumps({
        "before_mb": before,
        "peak_mb": peak_mb(),
        "reward": score.reward if score else None,
        "checks": [c.detail for c in score.checks] if score else None,
        "final_bytes": final.workspace.size,
    }))


anyio.run(main)
"""


def test_a_200mb_file_crosses_the_lifecycle_in_chunks(tmp_path: Path) -> None:
    task = tmp_path / "big-file"
    (task / "workspace" / "data").mkdir(parents=True)
    digest = hashlib.sha256()
    block = hashlib.sha512(b"agentenv").digest() * (1 << 14)  # 1 MiB, not all zeros
    with open(task / "workspace" / "data" / "big.bin", "wb") as f:
        for i in range(SIZE // len(block)):
            chunk = i.to_bytes(8, "big") + block[8:]
            digest.update(chunk)
            f.write(chunk)
    (task / "workspace" / "small.txt").write_text("small\n")
    check = (
        f'test "$(sha256sum < data/big.bin | cut -c1-64)" = {digest.hexdigest()}'
        ' && test "$(cat small.txt)" = small'
    )
    (task / "task.toml").write_text(
        f'[verifier]\nkind = "command"\ncommand = {json.dumps(check)}\ntimeout_s = 300\n'
    )
    (task / "instruction.md").write_text("Leave the files as they are.\n")

    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(task)], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["reward"] == 1.0, got
    assert got["final_bytes"] > SIZE  # the file really made the round trip
    growth = got["peak_mb"] - got["before_mb"]
    assert growth < MAX_GROWTH_MB, f"peak memory grew by {growth:.0f} MB: {got}"


async def test_a_sparse_file_bomb_in_the_final_workspace_scores_zero(tmp_path: Path) -> None:
    # A 64 MB workdir can hold a 50 GB sparse file: its tar would be 50 GB on the host (and
    # memory before archives were streamed). The verifier here passes on an empty workspace,
    # so an episode that gave up on the workspace instead of failing would be fooled.
    from agentenv.runner.episode import run_task
    from agentenv.runner.policy import Policies

    task_dir = tmp_path / "sparse"
    (task_dir / "workspace").mkdir(parents=True)
    (task_dir / "workspace" / "secret.txt").write_text("remove me\n")
    (task_dir / "task.toml").write_text(
        'disk = "64m"\n[verifier]\nkind = "command"\ncommand = "test ! -e secret.txt"\n'
    )
    (task_dir / "instruction.md").write_text("Remove secret.txt.\n")
    from agentenv.tasks import load_task

    task = load_task(task_dir)
    policies = Policies("command:truncate -s 50G huge.bin")
    try:
        with anyio.fail_after(300):
            traj, final = await run_task(task, policies.for_task(task))
    finally:
        await policies.aclose()
    assert traj.score is not None and traj.score.reward == 0.0, traj.score
    assert final.workspace.size < 1 << 20
    assert "larger than" in " ".join(c.detail for c in traj.score.checks), traj.score.checks
