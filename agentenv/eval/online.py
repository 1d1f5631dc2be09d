"""Whether this host reaches the internet, asked once per job that has a task asking for it.

A task that asks for the internet (``network = "bridge"``; Harbor's ``allow_internet =
true`` or ``network_mode = "public"``) run on a host without it would fail in a way its
verifier cannot tell from a wrong answer: a ``test.sh`` that downloads its test runner
writes reward 0 when the download fails. So such a task's episodes are not run there:
each is an infrastructure error that says so (outcome ``no_internet``), run again by a
resume on a host that has it. The probe is the runner's: a public name must resolve and
answer on port 443 within a few seconds. ``AGENTENV_ONLINE=1`` (or ``0``) says the
answer instead, for a host whose sandbox engine reaches the internet another way (a
proxy, a remote engine) than the runner does.
"""

from __future__ import annotations

import os
import socket

PROBES = (("pypi.org", 443), ("github.com", 443), ("deb.debian.org", 443))
"""Where the probe knocks: hosts a task's setup most often downloads from."""

ENV = "AGENTENV_ONLINE"


def host_online(timeout_s: float = 3.0) -> bool:
    """Whether any of :data:`PROBES` resolves and accepts a connection (blocking, at most
    about ``timeout_s`` per probe); ``AGENTENV_ONLINE`` overrides."""
    said = os.environ.get(ENV, "").strip().lower()
    if said in ("1", "true", "yes"):
        return True
    if said in ("0", "false", "no"):
        return False
    for host, port in PROBES:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            continue
    return False


def no_internet_reason(task_id: str) -> str:
    """The error of an episode not run because its task asks for the internet."""
    return (
        f"task {task_id} asks for the internet (network 'bridge'; Harbor: allow_internet = "
        "true or network_mode = 'public') and this host has none (none of "
        + ", ".join(h for h, _ in PROBES)
        + f" answered): not run, an infrastructure error, not a 0. Run it where the "
        f"internet is (a resume runs it), or set {ENV}=1 if the sandboxes reach it "
        "another way"
    )
