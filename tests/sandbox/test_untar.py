"""Uploads through the executor (``upload_tar``/``upload`` on the fast path): what the
engine's archive upload gave (folders, files, symlinks, hard links, long and odd names,
modes, times, owners as root), and never a byte outside the destination, whatever the
archive or a symlink planted in the destination says; a refused or broken archive leaves the
executor in step for the next call. On whichever backend the run uses."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import AsyncIterator

import pytest

from agentenv.sandbox import Sandbox, SandboxSpec, create
from agentenv.verify import CHECKER_CAPS

pytestmark = pytest.mark.anyio

MTIME = 1_600_000_000
ODD = "sp ace/ünï cödé/" + "long-" * 40 + "name.txt"  # past ustar's 100 bytes: a pax header


@pytest.fixture(scope="module")
async def root_box() -> AsyncIterator[Sandbox]:
    # as the checker's root is: it may give files to the agent's user
    spec = SandboxSpec(read_only=True, scratch=("/scratch",), cap_add=CHECKER_CAPS)
    async with await create(spec) as box:
        yield box


@pytest.fixture(scope="module")
async def agent_box() -> AsyncIterator[Sandbox]:
    async with await create(SandboxSpec(user="1000:1000", read_only=True)) as box:
        yield box


def _tar(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _entry(
    name: str, kind: bytes = tarfile.REGTYPE, *, mode: int = 0o644, link: str = "", uid: int = 0
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname, info.mtime = kind, mode, link, MTIME
    info.uid = info.gid = uid
    return info


def _shape(uid: int) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """A workspace's shapes: nested and read-only folders, modes, an executable, a symlink
    inside, a hard link, a long odd name, a 12 MB file and 500 small ones."""
    big = os.urandom(12 << 20)
    entries: list[tuple[tarfile.TarInfo, bytes | None]] = [
        (_entry("src", tarfile.DIRTYPE, mode=0o750, uid=uid), None),
        (_entry("src/pkg", tarfile.DIRTYPE, mode=0o755, uid=uid), None),
        (_entry("src/pkg/run.sh", mode=0o755, uid=uid), b"#!/bin/sh\necho ran\n"),
        (_entry("src/pkg/secret", mode=0o600, uid=uid), b"s3cret"),
        (_entry("src/link", tarfile.SYMTYPE, link="pkg/run.sh", uid=uid), None),
        (_entry("src/hard", tarfile.LNKTYPE, link="src/pkg/secret", uid=uid), None),
        (_entry("frozen", tarfile.DIRTYPE, mode=0o555, uid=uid), None),
        (_entry("frozen/inside.txt", mode=0o444, uid=uid), b"read-only folder"),
        (_entry(ODD, uid=uid), b"odd"),
        (_entry("big.bin", uid=uid), big),
    ]
    entries += [(_entry(f"many/f{i:04d}.txt", uid=uid), f"{i}\n".encode()) for i in range(500)]
    return entries


LIST = r"""
import os, sys, json
root = sys.argv[1]
out = {}
for base, dirs, files in os.walk(root):
    for name in dirs + files:
        p = os.path.join(base, name)
        st = os.lstat(p)
        out[os.path.relpath(p, root)] = [st.st_mode, st.st_uid, st.st_gid, int(st.st_mtime),
            st.st_nlink, os.readlink(p) if os.path.islink(p) else None]
print(json.dumps(out))
"""


async def _listing(box: Sandbox, root: str) -> dict[str, list[object]]:
    done = await box.exec(["python3", "-c", LIST, root])
    assert done.ok, done.stderr
    found: dict[str, list[object]] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("who", ["root", "agent"])
async def test_a_workspace_goes_in_as_the_engine_would_put_it(
    who: str, root_box: Sandbox, agent_box: Sandbox
) -> None:
    box, uid = (root_box, 1234) if who == "root" else (agent_box, 1000)
    dest = "/scratch/ws" if who == "root" else "/tmp/ws"
    assert (await box.exec(["mkdir", "-p", dest])).ok
    entries = _shape(uid)
    await box.upload_tar(_tar(entries), dest)
    got = await _listing(box, dest)
    for info, data in entries:
        mode, owner, _, mtime, _, link = got[info.name]
        assert owner == uid, info.name  # the tar's owner as root; the agent's own as the agent
        assert mtime == MTIME, info.name
        if info.issym():
            assert link == info.linkname
            continue
        if info.islnk():
            continue  # the file it names: checked there
        assert mode & 0o7777 == info.mode, (info.name, oct(mode))
        if data is not None and len(data) < 1000 and info.mode & 0o004:
            assert await box.read_file(f"{dest}/{info.name}") == data
    assert got["src/hard"][4] == 2 and got["src/pkg/secret"][4] == 2  # one file, two names
    assert await box.read_file(f"{dest}/big.bin") == entries[-501][1]
    ran = await box.exec(["sh", "-c", f"cd {dest}/src && ./link"])
    assert ran.stdout == "ran\n"


ATTACKS = {
    "dot-dot": [(_entry("../escaped"), b"x")],
    "absolute": [(_entry("/scratch/attack/outside/escaped"), b"x")],
    "through a symlink of the archive": [
        (_entry("out", tarfile.SYMTYPE, link="/scratch/attack/outside"), None),
        (_entry("out/escaped"), b"x"),
    ],
    "through a relative symlink": [
        (_entry("up", tarfile.SYMTYPE, link="../outside"), None),
        (_entry("up/escaped"), b"x"),
    ],
    "a hard link to a file outside": [
        (_entry("hard", tarfile.LNKTYPE, link="../outside/target"), None),
    ],
    "a device": [(_entry("null", tarfile.CHRTYPE), None)],
}


@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_no_entry_is_written_outside_the_destination(attack: str, root_box: Sandbox) -> None:
    # root writes here (the checker lays out the agent's workspace as root): the worst case
    prepared = await root_box.exec(
        "rm -rf /scratch/attack && mkdir -p /scratch/attack/dest /scratch/attack/outside"
        " && echo original > /scratch/attack/outside/target"
    )
    assert prepared.ok, prepared.stderr
    with pytest.raises(OSError):
        await root_box.upload_tar(_tar(ATTACKS[attack]), "/scratch/attack/dest")
    after = await root_box.exec(
        "ls -A /scratch/attack/outside; ls -A /scratch/attack;"
        " stat -c %h /scratch/attack/outside/target"
    )
    assert after.stdout.split() == ["target", "dest", "outside", "1"], after.stdout
    # the refused archive was read to its end: the next calls are in step
    await root_box.upload_tar(_tar([(_entry("fine.txt"), b"fine")]), "/scratch/attack/dest")
    assert await root_box.read_file("/scratch/attack/dest/fine.txt") == b"fine"


async def test_a_symlink_planted_in_the_destination_is_not_followed(agent_box: Sandbox) -> None:
    # the agent's processes may still run (Harbor verifies in the agent's sandbox): a folder
    # of the archive swapped for a symlink to elsewhere is not written through, and a file's
    # name that is a symlink is replaced, not written through
    planted = await agent_box.exec(
        "rm -rf /tmp/dest /tmp/elsewhere && mkdir -p /tmp/dest /tmp/elsewhere"
        " && ln -s /tmp/elsewhere /tmp/dest/sub && ln -s /tmp/elsewhere/victim /tmp/dest/f"
        " && echo mine > /tmp/elsewhere/victim"
    )
    assert planted.ok, planted.stderr
    with pytest.raises(OSError):
        await agent_box.upload_tar(_tar([(_entry("sub/x"), b"x")]), "/tmp/dest")
    await agent_box.upload_tar(_tar([(_entry("f"), b"new")]), "/tmp/dest")
    assert await agent_box.read_file("/tmp/elsewhere/victim") == b"mine\n"
    assert await agent_box.read_file("/tmp/dest/f") == b"new"
    assert (await agent_box.exec("ls -A /tmp/elsewhere")).stdout.split() == ["victim"]


async def test_a_broken_archive_fails_and_the_next_call_works(agent_box: Sandbox) -> None:
    assert (await agent_box.exec("mkdir -p /tmp/broken")).ok
    whole = _tar([(_entry("a.bin"), os.urandom(200_000))])
    for bad in (whole[:150_000], b"not a tar at all" * 1000):
        with pytest.raises(OSError):
            await agent_box.upload_tar(bad, "/tmp/broken")
        assert (await agent_box.exec("echo in step")).stdout == "in step\n"
    with pytest.raises(FileNotFoundError):
        await agent_box.upload_tar(whole, "/no/such/folder")
    await agent_box.upload_tar(whole, "/tmp/broken")
    assert len(await agent_box.read_file("/tmp/broken/a.bin")) == 200_000


async def test_a_root_without_chown_says_which_entry_it_could_not_give() -> None:
    async with await create(SandboxSpec(read_only=True)) as box:
        with pytest.raises(PermissionError, match="1234:1234"):
            await box.upload_tar(_tar([(_entry("theirs.txt", uid=1234), b"x")]), "/tmp")
        await box.upload_tar(_tar([(_entry("ours.txt"), b"x")]), "/tmp")  # root's: no chown
        assert await box.read_file("/tmp/ours.txt") == b"x"


async def test_a_root_without_capabilities_in_a_writable_image_still_gets_its_workspace() -> None:
    # a Harbor task's agent sandbox: root without capabilities on the image's own folders
    # (one read-only, one of another uid's): the executor could not write there, so these
    # uploads go where they can (the engine, podman cp), as before
    async with await create(SandboxSpec(read_only=False, workdir="/app")) as box:
        made = await box.exec("mkdir -p /app/ro && echo old > /app/ro/f && chmod 555 /app/ro")
        assert made.ok, made.stderr
        archive = _tar(
            [(_entry("ro", tarfile.DIRTYPE, mode=0o555), None), (_entry("ro/f"), b"new")]
        )
        await box.upload_tar(archive, "/app")
        assert await box.read_file("/app/ro/f") == b"new"


async def test_odd_times_and_names_in_the_agents_archive_are_not_an_executor_crash(
    root_box: Sandbox,
) -> None:
    # an mtime far past time_t (tmpfs takes 2**63-1; Python rounds it up), and names that
    # are not UTF-8: the upload works or says why, and the executor lives on
    assert (await root_box.exec("mkdir -p /scratch/odd")).ok
    far = _entry("far.txt")
    far.mtime = 2**63 - 1
    latin = _entry("caf\udce9.txt")  # a Latin-1 byte, as the agent's filesystem may hold
    await root_box.upload_tar(_tar([(far, b"x"), (latin, b"y")]), "/scratch/odd")
    assert await root_box.read_file("/scratch/odd/far.txt") == b"x"
    listed = await root_box.exec(["python3", "-c", "import os; print(os.listdir(b'/scratch/odd'))"])
    assert "caf\\xe9.txt" in listed.stdout
    assert (await root_box.exec("echo alive")).stdout == "alive\n"
