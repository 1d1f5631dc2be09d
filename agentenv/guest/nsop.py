"""Work on a container's files from the host, inside its mount namespace:

    python -I -S nsop.py tar PID CONTAINER PATH    a tar of PATH to stdout (exit 3: no PATH)
    python -I -S nsop.py layout PID CONTAINER ROOT UID:GID PATH...
                                                   make each folder and give it to UID:GID
                                                   (unless 0:0); with ROOT=open, a root
                                                   folder of mode 0555 becomes 0755

``podman cp`` cannot read a tmpfs mount (a read-only sandbox's workdir) while the container
is frozen, and the agent's final workdir must be read frozen; Docker's engine can, but starts
a process of its own for every archive (~70 ms of CPU, against ~30 here); and Podman's tmpfs
mounts take no owner, while the sandbox itself has no CAP_CHOWN. Rather than give any process
in the sandbox privileges, this runs as a child of the host's Python (``-S``: no
site-packages, whose ``.pth`` files would run code in a root process) and joins the mount
namespace of the container's PID 1: the root becomes the container's, so its symlinks resolve
inside it. It runs as host root in a world the agent wrote, so nothing of that world may ever run:

- the namespace is opened first, and only then is PID 1 checked to be the container's (its
  cgroup names the container): a PID reused by a host process is refused;
- after the switch nothing can be imported (only built-in and frozen modules: a late import,
  a codec lookup, would otherwise load the container's files), user and group names are not
  looked up (glibc's NSS would load the container's modules), and no traceback is printed
  (it reads source files and their codecs): any error is one line on stderr and exit 1;
- the walk keeps one directory iterator and one path per level, and the process's memory is
  capped, so a tree deep, wide or long-named costs bounded memory; a file that cannot be
  opened (a lease held by a frozen process) is left out and named on stderr, never a failure
  of the whole read.
"""

import ctypes
import importlib.machinery
import os
import resource
import sys
import tarfile

CLONE_NEWNS = 0x00020000
MEMORY_CAP = 1 << 30


def _fail(message: str, code: int = 1) -> None:
    os.write(2, (message + "\n").encode("utf-8", "replace"))
    os._exit(code)


def enter(pid: int, container_id: str) -> None:
    """Join the mount namespace (and so the root) of ``pid``, the container's PID 1."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    with open(f"/proc/{pid}/cgroup", "rb") as cgroups:
        if container_id.encode() not in cgroups.read():
            _fail(f"process {pid} is not the container's (it has exited)")
    tarfile.pwd = None  # type: ignore[attr-defined]
    tarfile.grp = None  # type: ignore[attr-defined]
    if libc.setns(fd, CLONE_NEWNS) != 0:
        _fail(f"setns: {os.strerror(ctypes.get_errno())}")
    os.close(fd)
    sys.meta_path[:] = [importlib.machinery.BuiltinImporter, importlib.machinery.FrozenImporter]
    sys.path_hooks[:] = []
    sys.path[:] = []
    sys.path_importer_cache.clear()


def tar(path: str) -> int:
    """Walk without recursion and with names relative to the current folder (entering each
    folder, leaving by ``..``): a tree deeper than PATH_MAX lets anyone name from the top is
    archived whole, as Docker's engine does."""
    if not os.path.lexists(path):
        _fail(f"{path}: no such file or folder", 3)
    name = os.path.basename(path.rstrip("/")) or "."
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as out:
        top = out.gettarinfo(path, arcname=name)
        if not top.isdir():
            _add(out, path, top)
            return 0
        out.addfile(top)
        os.chdir(path)
        prefix = name
        stack = [os.scandir(".")]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop().close()
                os.chdir("..")
                prefix = prefix.rpartition("/")[0]
                continue
            try:
                info = out.gettarinfo(entry.name, arcname=f"{prefix}/{entry.name}")
            except OSError:
                continue  # gone meanwhile
            if info is None:
                continue  # a socket: tar has no type for it
            if not info.isdir():
                _add(out, entry.name, info)
                continue
            try:
                os.chdir(entry.name)
                listing = os.scandir(".")
            except OSError as e:
                _skipped(info.name, e)
                continue
            out.addfile(info)
            stack.append(listing)
            prefix = info.name
    return 0


def _add(out: tarfile.TarFile, name: str, info: tarfile.TarInfo) -> None:
    if not info.isreg():
        out.addfile(info)  # a symlink is stored, never followed; FIFOs and devices too
        return
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:  # a lease a frozen process holds, say: left out, not a failure
        _skipped(info.name, e)
        return
    with os.fdopen(fd, "rb") as data:
        out.addfile(info, data)


def _skipped(name: str, error: OSError) -> None:
    os.write(2, f"left out {name!r}: {error.strerror}\n".encode("utf-8", "replace"))


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
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # a directory open per level
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    op, pid, container_id = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    enter(pid, container_id)
    if op == "tar":
        return tar(sys.argv[4])
    if op == "layout":
        return layout(sys.argv[4], sys.argv[5], sys.argv[6:])
    _fail(f"unknown operation {op!r}", 2)
    return 2


if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except BaseException as e:  # one line, no traceback: printing one would read files
        _fail(f"{type(e).__name__}: {e}")
    os._exit(code)
