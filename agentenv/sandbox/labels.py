"""The labels on everything we create, and how to tell whether its owner is gone.

Every container and snapshot image carries ``agentenv.run`` (run id), ``agentenv.owner``
(``host:pid:start``, the creating process) and ``agentenv.expires`` (unix time), so that
``agentenv gc`` can remove what a crashed or killed process left behind, and never touch
anything that is not ours. What is made inside :func:`job_scope` also carries
``agentenv.job``, so that a resumed job can collect what its own killed runs left behind.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

RESERVED_PREFIX = "agentenv."
RUN = "agentenv.run"
OWNER = "agentenv.owner"
EXPIRES = "agentenv.expires"
KIND = "agentenv.kind"  # "sandbox" or "snapshot"
CREATED = "agentenv.created"
JOB = "agentenv.job"  # the job (an eval job's folder) whose run made it
GROUP = "agentenv.compose"  # a compose environment's containers, network and volumes: its name
SNAPSHOT_REPOSITORY = "agentenv/snapshot"  # where snapshot images are tagged
KEPT = "kept"  # the owner of objects meant to outlive their process (expiry only)


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot: with the pid, it names one process
    even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2 :].split()[19].decode()
    except (OSError, IndexError):
        return "0"


@cache
def run_id() -> str:
    """This process's run id: ``$AGENTENV_RUN_ID`` or a new random one."""
    return os.environ.get("AGENTENV_RUN_ID") or uuid.uuid4().hex[:12]


def owner() -> str:
    """``host:pid:start`` of the current process."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


# a context variable, not a parameter: the sandboxes of a job are made deep in the episode
# lifecycle, and every task of the job's task group inherits the job's context
_job: ContextVar[str | None] = ContextVar("agentenv_job", default=None)


@contextmanager
def job_scope(job: str) -> Iterator[None]:
    """Label everything made inside this block (in this task and the tasks it starts)
    with ``agentenv.job=job``."""
    token = _job.set(job)
    try:
        yield
    finally:
        _job.reset(token)


def labels_for(kind: str, ttl_s: float, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The labels for a new object of ``kind`` that may be collected after ``ttl_s``."""
    now = time.time()
    job = _job.get()
    return {
        **(extra or {}),
        **({JOB: job} if job is not None else {}),
        RUN: run_id(),
        OWNER: owner(),
        KIND: kind,
        CREATED: str(int(now)),
        EXPIRES: str(int(now + ttl_s)),
    }


def owner_alive(owner_label: str) -> bool | None:
    """Whether the labelled owner process still runs; ``None`` when it is on another host
    (we cannot tell, so only the expiry applies)."""
    if owner_label == KEPT:
        return None
    host, _, rest = owner_label.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return not start or start == "0" or _start_ticks(pid) == start


def stale_reason(labels: dict[str, str], now: float | None = None) -> str | None:
    """Why an object with these labels may be collected, or ``None`` if it is still in use."""
    now = time.time() if now is None else now
    try:
        if float(labels.get(EXPIRES, "inf")) < now:
            return "expired"
    except ValueError:
        return "bad expiry label"
    if owner_alive(labels.get(OWNER, "")) is False:
        return "owner gone"
    return None
