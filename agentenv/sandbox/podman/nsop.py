"""Work on a container's files from the host, inside its mount namespace:

    python -I nsop.py tar PID PATH              a tar of PATH, to stdout (exit 3: no PATH)
    python -I nsop.py layout PID ROOT UID:GID PATH...
                                                make each folder and give it to UID:GID
                                                (unless 0:0); with ROOT=open, a root
                                                folder of mode 0555 becomes 0755

``podman cp`` cannot read a tmpfs mount (a read-only sandbox's workdir) while the container
is frozen, and the agent's final workdir must be read frozen; and Podman's tmpfs mounts take
no owner, while the sandbox itself has no CAP_CHOWN. Rather than give any process in the
sandbox privileges, this runs as a child of the host's Python, imports everything first,
then joins the mount namespace of the container's PID 1: the root becomes the container's,
so its symlinks resolve inside it, and nothing of the container's (no binary, no library)
is ever run.

What could load code after the switch is shut off first: user and group names are not looked
up (glibc's NSS would load modules named by the container's /etc/nsswitch.conf), and
``sys.path`` is emptied (a module imported late would come from the container's files)."""

import ctypes
import os
import sys
import tarfile

CLONE_NEWNS = 0x00020000


def enter(pid: int) -> None:
    """Join the mount namespace (and so the root) of ``pid``."""
    tarfile.pwd = None  # type: ignore[attr-defined]
    tarfile.grp = None  # type: ignore[attr-defined]
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "setns")
    os.close(fd)
    sys.path[:] = []
    sys.path_importer_cache.clear()


def tar(path: str) -> int:
    """Walk without recursion and with names relative to the current folder (entering each
    folder, leaving by ``..``): a tree thousands of levels deep, deeper than PATH_MAX lets
    anyone name from the top, is archived whole, as Docker's engine does."""
    if not os.path.lexists(path):
        print(f"{path}: no such file or folder", file=sys.stderr)
        return 3
    name = os.path.basename(path.rstrip("/")) or "."
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as out:
        top = out.gettarinfo(path, arcname=name)
        if not top.isdir():
            out.add(path, arcname=name, recursive=False)  # a symlink is stored, not followed
            return 0
        out.addfile(top)
        os.chdir(path)
        stack = [(name, iter(sorted(os.listdir("."))))]
        while stack:
            prefix, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                os.chdir("..")
                continue
            try:
                info = out.gettarinfo(child, arcname=f"{prefix}/{child}")
            except OSError:
                continue  # gone meanwhile
            if info is None:
                continue  # a socket: tar has no type for it
            if info.isreg():
                fd = os.open(child, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as data:
                    out.addfile(info, data)
            else:
                out.addfile(info)
            if info.isdir():
                os.chdir(child)
                stack.append((info.name, iter(sorted(os.listdir(".")))))
    return 0


def layout(root: str, owner: str, paths: list[str]) -> int:
    # Podman makes the root of an image whose layers do not carry one 0555, Docker 0755:
    # root without capabilities could not make a folder in / on Podman alone.
    if root == "open" and os.stat("/").st_mode & 0o777 == 0o555:
        os.chmod("/", 0o755)
    uid, _, gid = owner.partition(":")
    for path in paths:
        os.makedirs(path, mode=0o755, exist_ok=True)
        if (uid, gid) != ("0", "0"):
            os.chown(path, int(uid), int(gid), follow_symlinks=False)
    return 0


def main() -> int:
    op, pid = sys.argv[1], int(sys.argv[2])
    enter(pid)
    if op == "tar":
        return tar(sys.argv[3])
    if op == "layout":
        return layout(sys.argv[3], sys.argv[4], sys.argv[5:])
    print(f"unknown operation {op!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
