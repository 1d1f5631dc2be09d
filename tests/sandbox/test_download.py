"""A frozen Docker sandbox is read from the host, inside its mount namespace (nsop.py),
not by the engine: the archive must be the one the engine gives, entry for entry, for the
shapes an agent's workdir takes (odd names, links in and out, a FIFO, hard links, a file
only root may read, a set-uid bit, a big file), and more where the engine gives up (a tree
deeper than PATH_MAX); where this host cannot read it the engine still does."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentenv.sandbox import Sandbox, SandboxSpec, create
from agentenv.sandbox.container import namespace as container
from agentenv.sandbox.container import sandbox as docker_sandbox
from agentenv.sandbox.errors import ArchiveTooLarge

pytestmark = pytest.mark.anyio

TREE = r"""
set -e
cd /workspace
mkdir -p src/pkg 'odd name' empty
printf 'print(1)\n' > src/pkg/mod.py
printf 'x' > 'odd name/sp ace & $dollar'
printf 'latin' > "$(printf 'caf\351')"
head -c 3000000 /dev/urandom > big.bin
: > empty.txt
ln -s pkg/mod.py src/rel-link
ln -s /etc/passwd abs-link
ln -s ../../../../ up-link
ln -s missing dangling
ln src/pkg/mod.py hard-link.py
mkfifo pipe
printf 'secret' > root-only && chmod 000 root-only
chmod 4755 src/pkg/mod.py
mkdir deep && cd deep  # 90 levels of 52 characters: deeper than PATH_MAX lets anyone name
d=$(printf 'd%.0s' $(seq 50))
for i in $(seq 10 99); do mkdir "$d$i"; cd "$d$i"; done
echo bottom > f
"""


def _entries(archive: bytes) -> dict[str, tuple[object, ...]]:
    """Name -> what a reader gets. Normalised where engines differ harmlessly: Docker's
    modes carry the file type's bits too; which name of a hard-linked file holds the data
    is up to the order of the walk (both give the same content under both names)."""
    seen = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for m in tar.getmembers():
            data = tar.extractfile(m) if m.isreg() or m.islnk() else None
            digest = hashlib.sha256(data.read()).hexdigest() if data else None
            kind = tarfile.REGTYPE if m.islnk() else m.type
            link = "" if m.islnk() else m.linkname
            seen[m.name] = (kind, m.mode & 0o7777, m.uid, m.gid, link, int(m.mtime), digest)
    return seen


@pytest.fixture
def by_engine(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Why frozen reads fell back to the engine, as the backend says it."""
    said: list[str] = []
    monkeypatch.setattr(docker_sandbox, "_read_by_engine", said.append)
    return said


@pytest.fixture(scope="module")
async def box() -> AsyncIterator[Sandbox]:
    async with await create(SandboxSpec()) as sandbox:
        done = await sandbox.exec(TREE)
        assert done.ok, done
        yield sandbox


async def test_the_frozen_read_is_the_engines(
    box: Sandbox, by_engine: list[str], tmp_path: Path
) -> None:
    running = await box.download("/workspace")  # running: the engine reads it
    await box.pause()
    try:
        frozen = await box.download("/workspace")
        # the caller's limit and a missing path are answers, not reasons to ask the engine
        with pytest.raises(ArchiveTooLarge):
            await box.download_to("/workspace", tmp_path / "cut.tar", max_bytes=1 << 20)
        with pytest.raises(FileNotFoundError):
            await box.download("/workspace/absent")
    finally:
        await box.resume()
    assert by_engine == []  # read from the host
    engine, ours = _entries(running), _entries(frozen)
    assert {"workspace/pipe", "workspace/root-only", "workspace/hard-link.py"} <= set(ours)
    assert ours["workspace/src/pkg/mod.py"][1] == 0o4755
    assert {name: ours.get(name) for name in engine} == engine
    # and more: Docker's engine leaves out, without a word, what lies deeper than PATH_MAX
    deeper = set(ours) - set(engine)
    assert any(name.endswith("/f") for name in deeper), "the bottom of the deep tree"
    assert all(name.startswith("workspace/deep/") and len(name) > 3900 for name in deeper)


async def test_where_this_host_cannot_read_it_the_engine_does(
    box: Sandbox, by_engine: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # run as nobody, the read cannot join the namespace: it fails, and the engine reads
    # the same archive (in the engine's shape: the deep tree cut at PATH_MAX)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    monkeypatch.setattr(container, "NSOP", [*nobody, *container.NSOP])
    running = await box.download("/workspace")
    await box.pause()
    try:
        frozen = await box.download("/workspace")
    finally:
        await box.resume()
    assert len(by_engine) == 1 and "Permission denied" in by_engine[0], by_engine
    assert _entries(frozen) == _entries(running)
