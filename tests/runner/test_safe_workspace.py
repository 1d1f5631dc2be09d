"""What may cross from the agent's sandbox into a checker sandbox: the workdir's tar, cut
down on the host. Hostile archives are built here as a sandbox could produce them."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from agentenv.archive import Archive
from agentenv.runner.workspace import safe_workspace

pytestmark = pytest.mark.no_docker

WD = "/workspace"


def archive(*entries: tuple[str, str, str]) -> Archive:
    """A tar of ``workspace/...`` entries: (kind, name, file text or link target)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        root = tarfile.TarInfo("workspace")
        root.type = tarfile.DIRTYPE
        tar.addfile(root)
        for kind, name, value in entries:
            info = tarfile.TarInfo(f"workspace/{name}")
            if kind == "file":
                data = value.encode()
                info.size, info.mode = len(data), 0o4755
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {
                "dir": tarfile.DIRTYPE,
                "link": tarfile.SYMTYPE,
                "hard": tarfile.LNKTYPE,
                "fifo": tarfile.FIFOTYPE,
                "dev": tarfile.CHRTYPE,
            }[kind]
            info.linkname = value
            tar.addfile(info)
    return Archive.from_bytes(buf.getvalue())


def kept(data: Archive) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(data) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_links_that_resolve_inside_are_kept_and_the_rest_dropped() -> None:
    out, dropped = safe_workspace(
        archive(
            ("dir", "src", ""),
            ("file", "src/a.py", "x = 1\n"),
            ("link", "alias.py", "src/a.py"),
            ("link", "src/up.py", "../alias.py"),
            ("link", "abs-in", "/workspace/src/a.py"),
            ("link", "abs-out", "/agentenv/tests/expected.csv"),
            ("link", "rel-out", "../agentenv/tests/expected.csv"),
            # lexically inside, but `up` leads to the workdir first: `..` then climbs out
            ("link", "up", "/workspace"),
            ("link", "escape.csv", "up/../agentenv/tests/expected.csv"),
            ("link", "deep", "src/../up/../etc/passwd"),
            ("link", "loop-a", "loop-b"),
            ("link", "loop-b", "loop-a"),
            ("hard", "hard.csv", "../agentenv/tests/expected.csv"),
            ("hard", "hard-in.py", "workspace/src/a.py"),  # another name of a kept file
            ("hard", "hard-ahead.py", "workspace/later.py"),  # names nothing met yet
            ("file", "later.py", "later\n"),
            ("fifo", "pipe", ""),
            ("dev", "disk", ""),
        ),
        WD,
        "1000:1000",
    )
    names = kept(out)
    assert {"src", "src/a.py", "alias.py", "src/up.py", "abs-in", "up"} <= set(names)
    for bad in ("abs-out", "rel-out", "escape.csv", "deep", "loop-a", "loop-b"):
        assert bad not in names and bad in dropped, bad
    for bad in ("hard.csv", "hard-ahead.py", "pipe", "disk"):
        assert bad not in names and bad in dropped
    assert names["hard-in.py"].isreg() and names["hard-in.py"].size == len("x = 1\n")
    with tarfile.open(out) as tar:
        copy = tar.extractfile("hard-in.py")
        assert copy is not None and copy.read() == b"x = 1\n"
    for info in names.values():
        assert (info.uid, info.gid) == (1000, 1000)
        assert info.mode & 0o7000 == 0  # no set-id or sticky bits


def test_entries_outside_the_workdir_and_garbage_never_cross() -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("etc/passwd", "workspace/../etc/shadow", "workspacex/a"):
            info = tarfile.TarInfo(name)
            tar.addfile(info, io.BytesIO(b""))
    out, dropped = safe_workspace(Archive.from_bytes(buf.getvalue()), WD, "1000:1000")
    assert kept(out) == {} and len(dropped) == 3
    out, dropped = safe_workspace(Archive.from_bytes(b"not a tar at all" * 100), WD, "1000:1000")
    assert kept(out) == {} and dropped and "unreadable" in dropped[0]


def test_hard_links_cannot_multiply_a_file_past_the_input() -> None:
    # 200 names of one 64 KiB file cost the agent 200 headers; copied, 12.5 MiB
    big = "x" * (64 << 10)
    names = [("hard", f"name{i}", "workspace/big.txt") for i in range(200)]
    source = archive(("file", "big.txt", big), *names)
    out, dropped = safe_workspace(source, WD, "1000:1000")
    assert os.path.getsize(out) <= 2 * os.path.getsize(source) + (64 << 10)
    copies = [n for n in kept(out) if n.startswith("name")]
    assert 0 < len(copies) < 200 and len(dropped) == 200 - len(copies)
