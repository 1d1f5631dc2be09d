"""What the container backends (Docker, Podman) share, written once: the sandbox's state
machine (:class:`ContainerSandbox`: create, attach, pause, resume, recycle, close,
snapshot, the executor channel and the ways around it) over a few engine primitives
(:class:`Driver`), and the pieces it is made of: the keep-alive process and labels
(``config``), pausing straight through the cgroup freezer or by the engine (``freezing``),
explaining a failed call from the container's state (``failure``), reading a frozen one
through ``nsop.py`` (``namespace``) and making a used one as new (``renew``). The
backends' folders hold only their drivers."""

from agentenv.sandbox.container.config import KEEPALIVE, sandbox_labels, snapshot_labels
from agentenv.sandbox.container.driver import DirectExec, Driver, Explain, Pacer
from agentenv.sandbox.container.failure import explain_failure
from agentenv.sandbox.container.freezing import (
    FREEZE_ATTEMPTS,
    FrozenBy,
    InspectState,
    freeze,
    frozen_here,
    seen_status,
    set_frozen,
    thaw,
    thaw_before_removal,
    who_froze,
)
from agentenv.sandbox.container.namespace import NSOP, lay_out, read_in_namespace
from agentenv.sandbox.container.renew import WIPE, kill_all_but_ours, recycle, writable_mounts
from agentenv.sandbox.container.sandbox import ContainerSandbox

__all__ = [
    "FREEZE_ATTEMPTS",
    "KEEPALIVE",
    "NSOP",
    "WIPE",
    "ContainerSandbox",
    "DirectExec",
    "Driver",
    "Explain",
    "FrozenBy",
    "InspectState",
    "Pacer",
    "explain_failure",
    "freeze",
    "frozen_here",
    "kill_all_but_ours",
    "lay_out",
    "read_in_namespace",
    "recycle",
    "sandbox_labels",
    "seen_status",
    "set_frozen",
    "snapshot_labels",
    "thaw",
    "thaw_before_removal",
    "who_froze",
    "writable_mounts",
]
