"""Write a tar of a path inside a container to stdout, read from the host through the
container's mount namespace: ``python -I nsread.py PID PATH``.

``podman cp`` cannot read a tmpfs mount (a read-only sandbox's workdir) while the container
is frozen, and the agent's final workdir must be read frozen. This runs as a child of the
host's Python, imports everything first, then joins the namespace of the container's PID 1:
the root becomes the container's, so its symlinks resolve inside it, and nothing of the
container's (no binary, no library) is ever run. Exits 3 when PATH does not exist.

What could load code after the switch is shut off first: user and group names are not looked
up (glibc's NSS would load modules named by the container's /etc/nsswitch.conf), and
``sys.path`` is emptied (a module imported late would come from the container's files)."""

import ctypes
import os
import sys
import tarfile

CLONE_NEWNS = 0x00020000


def main() -> int:
    pid, path = int(sys.argv[1]), sys.argv[2]
    tarfile.pwd = None  # type: ignore[attr-defined]
    tarfile.grp = None  # type: ignore[attr-defined]
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        print(f"setns: {os.strerror(err)}", file=sys.stderr)
        return 2
    os.close(fd)
    sys.path[:] = []
    sys.path_importer_cache.clear()
    if not os.path.lexists(path):
        print(f"{path}: no such file or folder", file=sys.stderr)
        return 3
    name = os.path.basename(path.rstrip("/")) or "."
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        tar.add(path, arcname=name)  # symlinks are stored, never followed
    return 0


if __name__ == "__main__":
    sys.exit(main())
