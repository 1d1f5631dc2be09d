"""stop_agent.py UID[:GID]: kill every process of the agent's user in a checker sandbox, again
until none is left, and exit 1 (verification then fails loudly) if one survives. Run as root
with CAP_KILL (and CAP_SETUID, CAP_SETGID); the agent's user can start nothing that belongs
to anyone else.

First ``kill(-1, SIGKILL)`` from a child that became the agent's user: the kernel signals
every process that user may signal in one step, which a fork bomb cannot outrun and which
reaches stopped processes and ones that made themselves non-dumpable alike. Then each
process left (found by the uids in ``/proc/PID/status``) is killed, until none is."""

import os
import signal
import sys
import time


def owned_by(uid):
    """Pids with ``uid`` among their real, effective and saved uids (``/proc/PID`` itself is
    owned by root for a non-dumpable process: its status says who it is)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/status" % name) as f:
                for line in f:
                    if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        break  # a zombie runs nothing: its parent reaps it
                    if line.startswith("Uid:"):
                        if uid in [int(u) for u in line.split()[1:4]]:
                            found.append(int(name))
                        break
        except (OSError, ValueError):
            pass  # exited while we looked
    return found


def kill_as(uid, gid):
    """``kill(-1, SIGKILL)`` as ``uid``:``gid``, from a child (False when none can be made
    or it cannot become that user)."""
    try:
        pid = os.fork()
    except OSError:
        return False  # no process to spare: a fork bomb at the pids limit
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
            code = 0
        except OSError:
            pass
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status == 0


def main():
    uid_text, _, gid_text = sys.argv[1].partition(":")
    uid = int(uid_text)
    gid = int(gid_text or uid_text)
    if uid == 0:
        sys.stderr.write("refusing to kill root's processes\n")
        return 2
    killed = 0
    for _ in range(50):  # a process may fork while we look: repeat until none is left
        found = owned_by(uid)
        if not found:
            print("killed %d" % killed)
            return 0
        kill_as(uid, gid)
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
