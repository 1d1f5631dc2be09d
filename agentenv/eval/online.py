"""Whether this host reaches the internet, asked once per job that has a task asking for it.

A task that asks for the internet (``network = "bridge"``; Harbor's ``allow_internet =
true`` or ``network_mode = "public"``) run on a host without it would fail in a way its
verifier cannot tell from a wrong answer: a ``test.sh`` that downloads its test runner
writes reward 0 when the download fails. So such a task's episodes are not run there:
each is an infrastructure error that says so (outcome ``no_internet``), run again by a
resume on a host that has it. The probe is the runner's: each of a few public names must
resolve and answer on port 443 within a few seconds. Each, not any: a host that reaches
only a package mirror (pypi.org and deb.debian.org answered by a local proxy, as on
agentenv's own CI) does not have the internet a ``test.sh`` that fetches ``astral.sh/uv``
or a GitHub release needs. ``AGENTENV_ONLINE=1`` (or ``0``) says the
answer instead, for a host whose sandbox engine reaches the internet another way (a
proxy, a remote engine) than the runner does.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentenv.tasks import Task

PROBES = (("pypi.org", 443), ("github.com", 443), ("deb.debian.org", 443))
"""Where the probe knocks: hosts a task's setup most often downloads from; all must answer."""

ENV = "AGENTENV_ONLINE"


def unreachable(timeout_s: float = 3.0) -> list[str]:
    """The hosts of :data:`PROBES` that did not resolve or accept a connection (blocking,
    at most about ``timeout_s`` each); none means online. ``AGENTENV_ONLINE`` overrides
    (``0``: every one)."""
    said = os.environ.get(ENV, "").strip().lower()
    if said in ("1", "true", "yes"):
        return []
    if said in ("0", "false", "no"):
        return [f"{host} ({ENV}={said})" for host, _ in PROBES]
    missing = []
    for host, port in PROBES:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                pass
        except OSError:
            missing.append(host)
    return missing


def needs_internet(task: Task) -> bool:
    """Whether ``task`` (a :class:`~agentenv.tasks.Task`) asks for the internet: its agent's
    network, or its verifier's own (Harbor's ``[verifier] network_mode = "public"``). An
    allowlist does not: an allowed host that does not answer is the task's to meet."""
    own = getattr(task.verifier, "network", None)
    return bool(task.network == "bridge" or own == "bridge")


def no_internet_reason(task: Task, missing: list[str]) -> str:
    """The error of an episode not run because ``task`` asks for the internet and this
    host did not reach ``missing``: which phase asks, and why."""
    if task.network == "bridge":
        who = (
            "its agent (network 'bridge'; Harbor: allow_internet = true or network_mode = 'public')"
        )
    else:
        who = (
            "its verifier (Harbor's [verifier] network_mode = 'public', or its default, the "
            "internet, given where tests/test.sh downloads, as Harbor's template does)"
        )
    return (
        f"task {task.id} asks for the internet for {who} and this host has not got it "
        f"({', '.join(missing)} did not answer): not run, an infrastructure error, not a 0. "
        f"Run it where the internet is (a resume runs it), or set {ENV}=1 if the sandboxes "
        "reach it another way"
    )
