"""The ``harbor`` check: a Harbor task's ``tests/test.sh`` and the reward it writes to
``/logs/verifier/reward.json`` (named numbers) or ``reward.txt`` (a number), read as Harbor
reads them: ``reward.json`` first; none, an empty one or one that does not parse is a
verifier error, never a 0. Where it runs is the check's ``mode`` (see
:mod:`agentenv.runner.harbor_verdict`): by default a new sandbox made from the agent's final
filesystem with none of its processes alive; ``separate`` a fresh one of the task's image
with the declared artifacts; ``shared`` (opt-in) the agent's own sandbox, as Harbor does."""

from __future__ import annotations

import json
import math
import os
import shlex
import tarfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentenv import scratch
from agentenv.sandbox.errors import ArchiveTooLarge, ExecUserError
from agentenv.sandbox.protocol import ExecResult, Sandbox
from agentenv.verify.base import CheckBase
from agentenv.verify.registry import in_agent_sandbox
from agentenv.verify.score import CheckResult, Score

MAX_REWARD_FILE = 1 << 20
TESTS = "/tests"
LOGS = "/logs/verifier"
ARTIFACTS = "/logs/artifacts"
NAME = "tests/test.sh"


class HarborArtifact(BaseModel):
    """One of a task's ``artifacts``: a path in the agent's sandbox, copied at the same path
    into a ``separate`` verifier's sandbox."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(pattern=r"^/", description="absolute path in the agent's sandbox")
    destination: str | None = Field(
        None,
        description="where it goes under the episode's artifacts folder (relative, no "
        "'..'); its source path without the leading '/' when unset",
    )
    exclude: list[str] = Field([], description="globs left out of a directory (tar's --exclude)")
    service: str | None = Field(
        None, description="the compose service it is read from; main (the agent's) when unset"
    )


class HarborCollect(BaseModel):
    """One ``[[verifier.collect]]`` command: run by the task (not the agent) once the agent
    is done and before the artifacts are read, in ``main`` or a compose service."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="a shell command (sh -c)")
    service: str = Field("main", description="the compose service it runs in")
    timeout_s: float = Field(60, gt=0)
    user: str | None = Field(
        None, description="who it runs as; the image's USER when unset, as in Harbor"
    )


class HarborVerifierEnvironment(BaseModel):
    """A ``separate`` verifier's own sandbox (``[verifier.environment]``, or
    ``tests/Dockerfile``): what differs from the agent's; unset fields are the task's."""

    model_config = ConfigDict(extra="forbid")

    dockerfile: str | None = Field(
        None,
        description="built (context: its folder) as the verifier's image: `tests/Dockerfile`, "
        "relative to the task folder",
    )
    bundled: bool = Field(
        False,
        description="the image holds `/tests` (a `docker_image` or `tests/Dockerfile` "
        "verifier, as Harbor): the task's tests/ is not uploaded",
    )
    cpus: float | None = Field(None, gt=0)
    memory: int | None = Field(None, gt=0, description="bytes")
    disk: int | None = Field(None, gt=0, description="bytes")
    workdir: str | None = Field(None, pattern=r"^/", description="test.sh's working folder")
    build_timeout_s: float | None = Field(None, gt=0)


class HarborCheck(CheckBase):
    """A Harbor task's verifier: ``tests/`` is put at ``/tests`` once the agent is done,
    ``test.sh`` runs as root in the workdir, and the reward is what that run wrote to
    ``/logs/verifier/reward.json`` or ``reward.txt``. See :mod:`agentenv.harbor`: only
    tasks loaded from Harbor's format carry it."""

    kind: Literal["harbor"]
    timeout_s: float = Field(600, gt=0)
    env: dict[str, str] = Field({})
    mode: Literal["final", "separate", "shared"] = Field(
        "final",
        description="where test.sh runs: `final` (default) a new sandbox made from the "
        "agent's final filesystem, none of its processes alive; `separate` (Harbor's "
        '`environment_mode = "separate"`) a fresh sandbox of `image` with `artifacts` '
        "copied in; `shared` the agent's own sandbox, its processes running (Harbor's "
        "default: the agent, root there, can decide its reward; opt-in only)",
    )
    image: str | None = Field(
        None, description="`separate` mode's image ([verifier.environment]); the task's if unset"
    )
    environment: HarborVerifierEnvironment = Field(
        HarborVerifierEnvironment(),
        description="`separate` mode's sandbox: resources, workdir, a tests/Dockerfile build",
    )
    artifacts: list[HarborArtifact] = Field(
        [],
        description="copied from the agent's final state into the episode's artifacts "
        "folder, and into a `separate` verifier",
    )
    collect: list[HarborCollect] = Field(
        [], description="commands run once the agent is done, before the artifacts are read"
    )
    network: Literal["none", "bridge", "allowlist"] | None = Field(
        None,
        description="the verifier's own network in a sandbox of its own (`final`, "
        "`separate`; Harbor's `[verifier] network_mode`); the task's when unset",
    )
    allowed_hosts: list[str] = Field(
        [], description="with `network = 'allowlist'`: what the verifier may reach"
    )
    on_system_change: Literal["review", "zero"] = Field(
        "review",
        description="what a change of system files (binaries, interpreters, ld.so.preload, "
        "site-packages, /etc/profile.d) not in `allow_system_changes` does: flag the "
        "episode for review, or also score it 0",
    )
    allow_system_changes: list[str] = Field(
        [], description="globs of system paths the reference solution changes (not flagged)"
    )
    user: str | None = Field(
        None,
        description="who test.sh runs as (a name, uid or uid:gid; Harbor's `[verifier] "
        "user`); the image's USER when unset, as in Harbor",
    )


@in_agent_sandbox("harbor")
async def verify_in_sandbox(box: Sandbox, tests: Path, check: HarborCheck, workdir: str) -> Score:
    """Run Harbor's verification in ``box`` (the agent's own sandbox in ``shared`` mode,
    else one made for it): ``/tests`` and the reward folder are laid down fresh (nothing
    left there counts), ``test.sh`` runs, and its reward file is read. A reward that is
    missing or unreadable, or a ``test.sh`` that timed out, is ``Score.error``; only a
    sandbox that dies raises."""
    started = time.monotonic()
    # laid out by root, as Harbor copies them in, whoever the image's USER is: the tests
    # root's and readable by all, the reward folder writable by test.sh's user. They are
    # uploaded (by whoever the sandbox runs as) to a folder of a name nobody could know
    staged = f"/tmp/.agentenv-tests-{os.urandom(8).hex()}"
    # a verifier image that holds its tests keeps them (Harbor does not upload them then)
    bundled = check.environment.bundled
    quoted = shlex.quote(LOGS) if bundled else f"{shlex.quote(TESTS)} {shlex.quote(LOGS)}"
    ready, root = await _as_root(
        box,
        f"rm -rf {quoted} && mkdir -p {LOGS} && chmod 0777 {LOGS} && mkdir -m 0777 {staged} "
        # the image's USER: the container's first process runs as it (/proc/1's owner
        # can be root for any process that is not dumpable; its status says who it is)
        "&& awk '/^Uid:/{u=$2} /^Gid:/{g=$2} END{print u\":\"g}' /proc/1/status",
    )
    image_user = ready.stdout.strip() or None
    if ready.ok and not bundled:
        await box.upload(tests, staged)
        ready = await box.exec(
            f"mv {staged} {TESTS} && chmod -R a+rX,go-w {TESTS}"
            + (f" && chown -R 0:0 {TESTS}" if root else ""),
            timeout=120,
            user="0:0" if root else None,
        )
    if not ready.ok:
        return _error(f"could not lay out {TESTS} and {LOGS}: {ready.stderr.strip()[-500:]}")

    def test(user: str | None) -> Awaitable[ExecResult]:
        argv = ["bash", f"{TESTS}/test.sh"]
        return box.exec(argv, timeout=check.timeout_s, cwd=workdir, env=check.env, user=user)

    note = ""
    try:
        ran = await test(check.user or (image_user if root else None))
    except ExecUserError as e:
        if check.user or e.reason != "not_permitted":
            raise  # the task named a user this sandbox cannot run as: a verifier error
        # a backend that cannot switch to the image's USER here (Podman: no engine exec
        # path): as root, and said so
        note = f"test.sh ran as root: this backend cannot run it as the image's user {image_user}\n"
        ran = await test(None)
    output = note + (ran.stdout + ran.stderr).strip()[-2000:]
    said = f"test.sh exit {ran.exit_code}; its output:\n{output}"
    if ran.timed_out:
        return _error(f"test.sh timed out after {check.timeout_s:g} s\n{output}", started)
    rewards, problem = await read_rewards(box)
    if problem is not None:
        return _error(f"{problem} ({said})", started)
    return scored(rewards, said, time.monotonic() - started)


async def _as_root(box: Sandbox, command: str) -> tuple[ExecResult, bool]:
    """Run ``command`` as root where the sandbox may switch users (a verifier's own
    sandbox), else as its user (the agent's own, in ``shared`` mode); and which it was."""
    try:
        return await box.exec(command, timeout=120, user="0:0"), True
    except ExecUserError as e:
        if e.reason != "not_permitted":
            raise
        return await box.exec(command, timeout=120), False


def scored(rewards: dict[str, float], said: str, took: float) -> Score:
    """The score of Harbor's named rewards: ``reward`` if present, else their mean, clamped
    to [0, 1] (and said so); each name a check; ``said`` (test.sh's output) in the first."""
    reward = rewards["reward"] if "reward" in rewards else sum(rewards.values()) / len(rewards)
    clamped = min(1.0, max(0.0, reward))
    checks = [
        CheckResult(name=name, score=min(1.0, max(0.0, value)), passed=value >= 1.0)
        for name, value in rewards.items()
    ]
    note = f"reward {reward:g} clamped to [0, 1]\n" if clamped != reward else ""
    checks[0].detail = (note + said)[:4000]
    return Score(reward=clamped, passed=clamped >= 1.0, checks=checks, duration_s=took)


async def read_rewards(box: Sandbox) -> tuple[dict[str, float], str | None]:
    """The rewards test.sh wrote, as Harbor takes them (``reward.json`` over
    ``reward.txt``), or why there are none. Each file is taken as a tar of at most
    :data:`MAX_REWARD_FILE` bytes: whatever left it there, it costs the runner no more
    memory than that, and a symlink is not followed."""
    for name, parse in (("reward.json", _from_json), ("reward.txt", _from_text)):
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
        if not raw.strip():
            return {}, f"{path} is empty"
        try:
            return parse(raw), None
        except (ValueError, TypeError) as e:
            return {}, f"{path}: {e}"
    return {}, f"test.sh wrote no {LOGS}/reward.json nor reward.txt"


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


def _error(detail: str, started: float | None = None) -> Score:
    """A verifier error (Harbor's RewardFileNotFound, parse and timeout errors): not a 0,
    not counted in pass@k; the reason and test.sh's output in the check."""
    check = CheckResult(name=NAME, score=0.0, passed=False, detail=detail[:4000], error=True)
    took = time.monotonic() - started if started is not None else 0.0
    first = detail.splitlines()[0] if detail else "no reward"
    return Score(reward=0.0, passed=False, checks=[check], error=first[:500], duration_s=took)
