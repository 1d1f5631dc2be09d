"""Run as the sandbox's user, once only init and keep-alive are left, to make a recycled
read-only sandbox as a new one would be::

    python3 -I -c "$(cat wipe.py)" "UID:GID|FIXED|SHARED"

Empties the folders a read-only sandbox may write (``FIXED``, the workdir and scratch
folders, given back to ``UID:GID`` at 0755; ``SHARED``, /tmp, /dev/shm and /dev/mqueue,
root's at 1777) and prints ``clean`` only if they are as a new sandbox's, with no System V
IPC object and no other process left; else ``left: ...`` naming what is.

Shipped as text (``-c``), not installed: stdlib only, Python >= 3.6.
"""

import os
import stat
import sys


def rm(path):
    """Remove ``path`` and everything under it, without recursion (a deep tree costs no
    stack), making our own folders writable first."""
    todo = [(path, False)]
    while todo:
        path, emptied = todo.pop()
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
        elif emptied:
            os.rmdir(path)
        else:
            if st.st_uid == os.geteuid():
                os.chmod(path, 0o700)
            todo.append((path, True))
            todo.extend((os.path.join(path, n), False) for n in os.listdir(path))


def empty(fixed, shared, uid, gid):
    """Empty every folder, drop its extended attributes, and give the fixed ones back."""
    for top in fixed + shared:
        if not os.path.isdir(top):
            continue
        for name in os.listdir(top):
            rm(os.path.join(top, name))
        for attr in os.listxattr(top):
            os.removexattr(top, attr)
    for top in fixed:
        if os.path.isdir(top):
            if os.geteuid() == 0:
                os.chown(top, uid, gid)
            os.chmod(top, 0o755)


def left_in_folders(fixed, shared, uid, gid):
    """What is left in the folders, or wrong in their owner or mode."""
    left = []
    for top in fixed + shared:
        if os.path.isdir(top):
            st = os.lstat(top)
            if os.listdir(top) or os.listxattr(top):
                left.append(top)
            want = (uid, gid, 0o755) if top in fixed else (0, 0, 0o1777)
            if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != want:
                left.append(top + " (owner or mode)")
    return left


def left_in_ipc():
    """The kinds of System V IPC object left."""
    left = []
    for kind in ("shm", "sem", "msg"):
        with open("/proc/sysvipc/" + kind) as f:
            if len(f.read().splitlines()) > 1:
                left.append("System V " + kind)
    return left


def left_running():
    """The processes left besides ours. Seen from inside too (a runtime whose processes the
    host cannot see, say): nothing runs but init, the keep-alive and its sleep (root's), this
    and the executor that started it."""
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in (os.getpid(), os.getppid()):
            continue
        try:
            with open("/proc/%s/status" % pid) as f:
                status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        name, uids = status["Name"].strip(), status["Uid"].split()
        if set(uids) != {"0"} or name not in ("docker-init", "podman-init", "tini", "sh", "sleep"):
            left.append("a process (%s, uid %s)" % (name, uids[0]))
    return left


def main(arg):
    """Wipe as ``arg`` (``UID:GID|FIXED|SHARED``) says and print what is left."""
    owner, fixed, shared = arg.split("|")
    uid, gid = (int(x) for x in owner.split(":"))
    fixed, shared = fixed.split(","), shared.split(",")
    empty(fixed, shared, uid, gid)
    left = left_in_folders(fixed, shared, uid, gid) + left_in_ipc() + left_running()
    print("clean" if not left else "left: " + ", ".join(left))


if __name__ == "__main__":
    main(sys.argv[1])
