"""read_capped.py PATH LIMIT: write PATH's bytes to stdout if it is a regular file of at most
LIMIT bytes; exit 2 if it is missing or unreadable, 3 if it is not a regular file (a FIFO
would hang a reader), 4 if it is bigger. Never follows the agent into waiting forever."""

import os
import stat
import sys


def main():
    path, limit = sys.argv[1], int(sys.argv[2])
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
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
