"""Memory benchmark: a workspace holding one big file (400 MB by default) taken through a
sandbox and back, the way an episode moves it, streamed against held in memory.

Each way runs in a fresh child process, one after the other in the same run, and does what
an episode does to the workspace: tar the host folder, upload it into a sandbox, download
the sandbox's copy, and cut it down to what may cross into a checker sandbox, then upload
that again.

- **in memory** (the baseline, how the runner worked before): each archive is ``bytes``
  (``Sandbox.upload_tar(bytes)``, ``Sandbox.download``);
- **streamed** (how it works now): each archive is an ``agentenv.runner.Archive``, a tar file
  on the host, moved in chunks (``upload_tar(path)``, ``download_to``).

Printed per way: the child's peak memory over what it held after its imports, and the wall
time; then the ratios, streamed over in memory. Memory is the figure this bench is for:
a runner's peak must not grow with the size of a repo, times its concurrency.

Usage: ``.venv/bin/python bench/upload_memory.py [--mb N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import io, json, resource, sys, tarfile, time
from pathlib import Path

import anyio

from agentenv.archive import Archive
from agentenv.runner.workspace import safe_workspace, workspace_tar
from agentenv.sandbox import SandboxSpec
from agentenv.sandbox.docker import DockerSandbox

WORKDIR = "/workspace"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(way: str, folder: Path) -> None:
    async with await DockerSandbox.create(SandboxSpec(workdir=WORKDIR)) as box:
        before, started = peak_mb(), time.monotonic()
        sent = workspace_tar(folder, "1000:1000")
        if way == "memory":
            data = sent.read_bytes()
            del sent
            await box.upload_tar(data, WORKDIR)
            got = await box.download(WORKDIR)
            safe, _ = safe_workspace(Archive.from_bytes(got), WORKDIR, "1000:1000")
            again = safe.read_bytes()
            await box.upload_tar(again, WORKDIR)
            size = len(again)
        else:
            await box.upload_tar(sent, WORKDIR)
            raw = Archive.new()
            await box.download_to(WORKDIR, raw)
            safe, _ = safe_workspace(raw, WORKDIR, "1000:1000")
            await box.upload_tar(safe, WORKDIR)
            size = safe.size
        print(json.dumps({
            "way": way,
            "growth_mb": peak_mb() - before,
            "wall_s": time.monotonic() - started,
            "archive_mb": size / 2**20,
        }))


anyio.run(main, sys.argv[1], Path(sys.argv[2]))
"""


def run(way: str, folder: Path) -> dict[str, float]:
    """One way in a fresh child process; its printed figures."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, way, str(folder)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the {way} run failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Build the folder, run both ways, print the figures and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=400, help="size of the big file (MB)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentenv-bench-") as tmp:
        folder = Path(tmp) / "repo"
        folder.mkdir()
        block = bytes(range(256)) * 4096  # 1 MiB
        with open(folder / "big.bin", "wb") as f:
            for i in range(args.mb):
                f.write(i.to_bytes(8, "big") + block[8:])
        (folder / "README").write_text("a repo with one big file\n")
        rows = [run("memory", folder), run("streamed", folder)]
    print(f"workspace: one {args.mb} MB file; archive {rows[0]['archive_mb']:.0f} MB")
    print(f"{'way':<10} {'peak growth':>12} {'wall':>8}")
    for row in rows:
        print(f"{row['way']:<10} {row['growth_mb']:>9.1f} MB {row['wall_s']:>7.1f}s")
    memory, streamed = rows
    print(
        f"streamed / in memory: peak growth {streamed['growth_mb'] / memory['growth_mb']:.2g}x, "
        f"wall {streamed['wall_s'] / memory['wall_s']:.2f}x"
    )


if __name__ == "__main__":
    main()
