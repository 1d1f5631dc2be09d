"""What every container sandbox is made with, whatever its engine: the keep-alive process
PID 1 holds, and the labels of a sandbox and of a snapshot of it."""

from __future__ import annotations

from agentenv.sandbox.labels import KEPT, OWNER, labels_for
from agentenv.sandbox.spec import SandboxSpec

KEEPALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do /bin/sleep 3600 & wait $!; done"]
"""PID 1's one child (PID 1 is the engine's init, which reaps orphans), idling, by absolute
paths: nothing of ours runs through the sandbox's PATH. The executor is not started here:
PID 1 holds the container's stdin and stdout, which any process in the sandbox can open
through /proc/1/fd, so they cannot carry the protocol."""


def main_process(spec: SandboxSpec) -> tuple[list[str] | None, list[str], str]:
    """What the container runs after its init: ``(entrypoint, command, user)``, where an
    entrypoint of ``None`` keeps the image's and a user of ``""`` is the image's.

    By default the keep-alive replaces the image's ENTRYPOINT and CMD, as root (without
    capabilities) when the spec names a user, so that the sandbox's user cannot kill it
    and take the container down. With ``image_entrypoint``, as Harbor runs a task's image:
    its ENTRYPOINT kept, the keep-alive as its command (Harbor gives ``sh -c "sleep
    infinity"`` there), all as the image's USER (an entrypoint that ``exec "$@"``s runs the
    keep-alive; one that runs a service in the foreground keeps the container up itself)."""
    if spec.image_entrypoint:
        return None, list(KEEPALIVE), ""
    return list(KEEPALIVE), [], "0:0" if spec.user else ""


def sandbox_labels(spec: SandboxSpec) -> dict[str, str]:
    """The labels a sandbox of ``spec`` carries: ours (owner, run, expiry) and the spec's."""
    labels = labels_for("sandbox", spec.ttl_s, spec.labels)
    if spec.outlive_owner:
        labels[OWNER] = KEPT  # no owner process: only the expiry applies
    return labels


def snapshot_labels(spec: SandboxSpec, keep_s: float | None) -> dict[str, str]:
    """A snapshot's labels: collectable once its process is gone, or, with ``keep_s``, only
    once that long has passed."""
    labels = labels_for("snapshot", keep_s or spec.ttl_s, spec.labels)
    if keep_s is not None:
        labels[OWNER] = KEPT
    return labels
