"""The ``harbor`` check: a Harbor task's ``tests/test.sh``, run in the agent's own sandbox
once it is done; the reward is what it wrote to ``/logs/verifier/reward.txt`` (a number) or
``reward.json`` (named numbers). Only tasks loaded from Harbor's format
(:mod:`agentenv.formats.harbor`) carry it, and it is never scored in a checker sandbox."""

from __future__ import annotations

import json
import math
import shlex
import tarfile
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from agentenv import scratch
from agentenv.sandbox.errors import ArchiveTooLarge
from agentenv.sandbox.protocol import Sandbox
from agentenv.verify.base import CheckBase
from agentenv.verify.registry import in_agent_sandbox
from agentenv.verify.score import CheckResult, Score

MAX_REWARD_FILE = 1 << 20
TESTS = "/tests"
LOGS = "/logs/verifier"


class HarborCheck(CheckBase):
    """A Harbor task's verifier: ``tests/`` is put at ``/tests`` in the agent's own sandbox
    once it is done, ``test.sh`` runs there, and the reward is what it wrote to
    ``/logs/verifier/reward.txt`` (a number) or ``reward.json`` (named numbers). See
    :mod:`agentenv.harbor`: only tasks loaded from Harbor's format carry it."""

    kind: Literal["harbor"]
    timeout_s: float = Field(600, gt=0)
    env: dict[str, str] = Field({})


@in_agent_sandbox("harbor")
async def verify_in_sandbox(box: Sandbox, tests: Path, check: HarborCheck, workdir: str) -> Score:
    """Harbor's verification in the agent's own (running) sandbox: ``/tests`` and the reward
    folder are laid down fresh (nothing the agent left there counts), ``test.sh`` runs, and
    its reward file is read. The agent's failures score 0; only a sandbox that dies raises."""
    started = time.monotonic()
    quoted = f"{shlex.quote(TESTS)} {shlex.quote(LOGS)}"
    ready = await box.exec(
        ["/bin/sh", "-c", f"rm -rf {quoted} && mkdir -p {quoted} && chmod 0777 {LOGS}"],
        timeout=120,
    )
    if not ready.ok:
        return _zero(f"could not lay out {TESTS} and {LOGS}: {ready.stderr.strip()[-500:]}")
    await box.upload(tests, TESTS)
    ran = await box.exec(
        ["bash", f"{TESTS}/test.sh"], timeout=check.timeout_s, cwd=workdir, env=check.env
    )
    output = (ran.stdout + ran.stderr).strip()[-2000:]
    if ran.timed_out:
        return _zero(f"test.sh timed out after {check.timeout_s:g} s\n{output}", started)
    rewards, problem = await _rewards(box)
    if problem is not None:
        return _zero(f"{problem} (test.sh exit {ran.exit_code})\n{output}", started)
    reward = rewards["reward"] if "reward" in rewards else sum(rewards.values()) / len(rewards)
    clamped = min(1.0, max(0.0, reward))
    checks = [
        CheckResult(name=name, score=min(1.0, max(0.0, value)), passed=value >= 1.0)
        for name, value in rewards.items()
    ]
    if clamped != reward:
        checks[0].detail = f"reward {reward:g} clamped to [0, 1]"
    return Score(
        reward=clamped,
        passed=clamped >= 1.0,
        checks=checks,
        duration_s=time.monotonic() - started,
    )


async def _rewards(box: Sandbox) -> tuple[dict[str, float], str | None]:
    """The rewards test.sh wrote, or why there are none. Each file is taken as a tar of at
    most :data:`MAX_REWARD_FILE` bytes: whatever left it there, it costs the runner no more
    memory than that, and a symlink is not followed."""
    for name, parse in (("reward.txt", _from_text), ("reward.json", _from_json)):
        path = f"{LOGS}/{name}"
        with scratch.folder("reward") as tmp:
            tar_path = Path(tmp) / "reward.tar"
            try:
                await box.download_to(path, tar_path, max_bytes=MAX_REWARD_FILE)
            except FileNotFoundError:
                continue
            except ArchiveTooLarge:
                return {}, f"{path} is larger than {MAX_REWARD_FILE} bytes"
            raw = _only_file(tar_path, name)
        if raw is None:
            return {}, f"{path} is not a regular file"
        try:
            return parse(raw), None
        except (ValueError, TypeError) as e:
            return {}, f"{path}: {e}"
    return {}, f"test.sh wrote no {LOGS}/reward.txt nor reward.json"


def _only_file(tar_path: Path, name: str) -> bytes | None:
    with tarfile.open(tar_path) as tar:
        member = next((m for m in tar.getmembers() if m.name == name), None)
        if member is None or not member.isreg():
            return None
        data = tar.extractfile(member)
        return data.read() if data is not None else None


def _from_text(raw: bytes) -> dict[str, float]:
    value = float(raw.decode(errors="replace").strip())
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a reward")
    return {"reward": value}


def _from_json(raw: bytes) -> dict[str, float]:
    data = json.loads(raw)
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        data = {"reward": data}
    if not isinstance(data, dict) or not data:
        raise ValueError("not an object of named rewards")
    rewards: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key!r} is not a number")
        if not math.isfinite(value):
            raise ValueError(f"{key!r} is not finite")
        rewards[str(key)] = float(value)
    return rewards


def _zero(detail: str, started: float | None = None) -> Score:
    check = CheckResult(name="tests/test.sh", score=0.0, passed=False, detail=detail[:4000])
    took = time.monotonic() - started if started is not None else 0.0
    return Score(reward=0.0, passed=False, checks=[check], duration_s=took)
