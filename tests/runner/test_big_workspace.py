"""A workspace with a 200 MB file goes through the whole lifecycle (prepare, the agent's
sandbox, its final state, a checker sandbox) without being held in memory: a runner's
memory must not grow with the size of a repo, times its concurrency."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

SIZE = 200 << 20
# generous: the lifecycle's own overhead is far below this, one copy of the file is not
MAX_GROWTH_MB = 120

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
