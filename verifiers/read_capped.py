"""read_capped.py PATH LIMIT [INSIDE]: write PATH's bytes to stdout if it is a regular file of
at most LIMIT bytes; exit 2 if it is missing or unreadable, 3 if it is not a regular file (a
FIFO would hang a reader), 4 if it is bigger, 5 if INSIDE is given and PATH (its links
followed) leads out of the folder INSIDE. Never follows the agent into waiting forever.

With INSIDE (the workdir, for a file the agent made) a link the agent left is followed only
as far as it stays in its own folder: a check reads the agent's file, never a hidden test or
a system file it points at. The resolved path is opened without following a link again, so
one swapped in after it was resolved is refused, not followed."""

import os
import stat
import sys


def resolve(path, inside):
    """PATH's real path when it lies inside INSIDE (or is INSIDE), else None."""
    root = os.path.realpath(inside)
    real = os.path.realpath(path)
    if real == root or real.startswith(root.rstrip("/") + "/"):
        return real
    return None


def main():
    path, limit = sys.argv[1], int(sys.argv[2])
    flags = os.O_RDONLY | os.O_NONBLOCK
    if len(sys.argv) > 3:
        real = resolve(path, sys.argv[3])
        if real is None:
            sys.stderr.write("%s: leads out of %s\n" % (path, sys.argv[3]))
            return 5
        path, flags = real, flags | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (path, e.strerror))
        return 2
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        sys.stderr.write("%s: not a regular file\n" % path)
        return 3
    if info.st_size > limit:
        sys.stderr.write("%s: %d bytes, more than %d\n" % (path, info.st_size, limit))
        return 4
    data = os.read(fd, limit + 1)
    if len(data) > limit:
        return 4
    os.write(1, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
