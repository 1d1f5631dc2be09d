"""Build every built-in harness's image on the base image (Docker), so the tests that run
harnesses find them: CI starts this beside its Docker stage (.ci/run). A build the tests
asked for at once is waited for, not repeated (a host-wide lock per image). Prints each
harness's image, its build time and size; exits non-zero if one failed."""

from __future__ import annotations

import sys
import time

import anyio

from agentenv.harnesses import harness, harness_names
from agentenv.harnesses.install import harness_image
from agentenv.sandbox.images import BASE_IMAGE


async def main() -> int:
    """Build them one after another (two cores: at once would only slow each)."""
    failed = 0
    for name in ("mini-swe-agent", "codex", "claude-code"):
        if name not in harness_names():
            continue
        started = time.monotonic()
        try:
            image = await harness_image(BASE_IMAGE, harness(name), backend="docker")
        except Exception as e:  # one harness's failure is reported, the others still built
            failed += 1
            print(f"{name}: FAILED after {time.monotonic() - started:.0f} s: {e}", flush=True)
            continue
        print(f"{name}: {image} in {time.monotonic() - started:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
