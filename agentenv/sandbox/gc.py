"""Find and remove what agentenv left behind: containers and snapshot images whose owner
process is gone or whose expiry has passed, and workdir volumes whose sandbox is gone. Only
objects carrying our labels are ever considered, so nothing else on the engine can be
touched."""

from __future__ import annotations

import time

import docker.errors
from pydantic import BaseModel

from agentenv.sandbox import labels as L
from agentenv.sandbox.engine import Engine


class Leftover(BaseModel):
    """One container or image of ours, and why it may be collected (``None``: in use)."""

    kind: str  # "sandbox", "snapshot" or "volume"
    id: str
    name: str
    status: str
    run: str
    owner: str
    job: str = ""  # the job whose run made it (see :func:`labels.job_scope`)
    created: float
    expires: float
    stale: str | None


def _row(
    kind: str, oid: str, name: str, status: str, labels: dict[str, str], now: float
) -> Leftover:
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
        stale=L.stale_reason(labels, now),
    )


def list_ours(engine: Engine) -> list[Leftover]:
    """Every container and snapshot image with our labels. Blocking."""
    now = time.time()
    rows = []
    for c in engine.api.containers(all=True, filters={"label": L.OWNER}):
        name = (c.get("Names") or ["?"])[0].lstrip("/")
        rows.append(_row("sandbox", c["Id"], name, c.get("State", "?"), c.get("Labels") or {}, now))
    for image in engine.api.images(filters={"label": f"{L.KIND}=snapshot"}):
        tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
        if tags and not any(t.startswith(f"{L.SNAPSHOT_REPOSITORY}:") for t in tags):
            continue  # built FROM a snapshot by someone: it inherited our labels, it isn't ours
        tags = tags or ["<untagged>"]
        rows.append(_row("snapshot", image["Id"], tags[0], "image", image.get("Labels") or {}, now))
    # a read-only sandbox's workdir volume goes with its container; one whose container was
    # removed without it (by hand, or by an engine that died) is always collectable
    found = engine.api.volumes(filters={"label": L.OWNER, "dangling": True}) or {}
    for volume in found.get("Volumes") or []:
        row = _row(
            "volume", volume["Name"], volume["Name"][:12], "unused", volume.get("Labels") or {}, now
        )
        rows.append(row.model_copy(update={"stale": row.stale or "its sandbox is gone"}))
    return rows


def collect(
    engine: Engine, *, everything: bool = False, dry_run: bool = False, job: str | None = None
) -> list[Leftover]:
    """Remove our stale containers, then our stale snapshot images; with ``everything``,
    all of ours. With ``job``, only that job's objects whose owner process is gone (on this
    host): what its killed runs left, never a live run's. Returns what was (or, with
    ``dry_run``, would be) removed. Blocking."""
    rows = list_ours(engine)
    if job is not None:
        doomed = [r for r in rows if r.job == job and L.owner_alive(r.owner) is False]
    else:
        doomed = [r for r in rows if everything or r.stale]
    if dry_run:
        return doomed
    removed = []
    # containers first: their volumes and images are in use until they are gone
    for row in sorted(doomed, key=lambda r: r.kind != "sandbox"):
        try:
            if row.kind == "sandbox":
                engine.api.remove_container(row.id, force=True, v=True)
            elif row.kind == "volume":
                engine.api.remove_volume(row.id)
            else:
                engine.api.remove_image(row.id, force=True)
            removed.append(row)
        except docker.errors.NotFound:
            removed.append(row)
        except docker.errors.APIError:
            # An image still used by a live container of someone else's: keep it.
            continue
    return removed
