"""stop_agent.py UID[:GID]: kill every process of the agent's user in a checker sandbox, again
until none is left, and exit 1 (verification then fails loudly) if one survives. Run as root
with CAP_KILL; the agent's user can start nothing that belongs to anyone else."""

import os
import signal
import sys
import time


def owned_by(uid):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat("/proc/" + name).st_uid == uid:
                found.append(int(name))
        except OSError:
            pass  # exited while we looked
    return found


def main():
    uid = int(sys.argv[1].split(":")[0])
    if uid == 0:
        sys.stderr.write("refusing to kill root's processes\n")
        return 2
    killed = 0
    for _ in range(50):  # a process may fork while we look: repeat until none is left
        found = owned_by(uid)
        if not found:
            print("killed %d" % killed)
            return 0
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.01)
    sys.stderr.write("processes of uid %d survive: %s\n" % (uid, owned_by(uid)))
    return 1


if __name__ == "__main__":
    sys.exit(main())
