"""Find and remove what agentenv left behind: sandboxes and snapshots whose owner process is
gone or whose expiry has passed, and workdir volumes whose sandbox is gone. Backends list
only objects carrying our labels, so nothing else on an engine can be touched; the choice of
what goes is made here, once, for every backend."""

from __future__ import annotations

from agentenv.sandbox import labels as L
from agentenv.sandbox.backend import Leftover, SandboxBackend

__all__ = ["Leftover", "collect", "leftover"]


def leftover(kind: str, oid: str, name: str, status: str, labels: dict[str, str]) -> Leftover:
    """A backend's object described by its labels, with why it may be collected."""

    def number(key: str) -> float:
        try:
            return float(labels.get(key, "0"))
        except ValueError:
            return 0.0

    return Leftover(
        kind=kind,
        id=oid,
        name=name,
        status=status,
        run=labels.get(L.RUN, ""),
        owner=labels.get(L.OWNER, ""),
        job=labels.get(L.JOB, ""),
        created=number(L.CREATED),
        expires=number(L.EXPIRES),
        stale=L.stale_reason(labels),
    )


def collect(
    backend: SandboxBackend,
    *,
    everything: bool = False,
    dry_run: bool = False,
    job: str | None = None,
) -> list[Leftover]:
    """Remove our stale containers, then our stale snapshot images; with ``everything``,
    all of ours. With ``job``, only that job's objects whose owner process is gone (on this
    host): what its killed runs left, never a live run's. Returns what was (or, with
    ``dry_run``, would be) removed. Blocking."""
    rows = backend.leftovers()
    if job is not None:
        doomed = [r for r in rows if r.job == job and L.owner_alive(r.owner) is False]
    else:
        doomed = [r for r in rows if everything or r.stale]
    if dry_run:
        return doomed
    # containers first: their volumes and images are in use until they are gone
    ordered = sorted(doomed, key=lambda r: r.kind != "sandbox")
    return [row for row in ordered if backend.remove(row)]
