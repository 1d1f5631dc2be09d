"""stop_agent.py [WORKDIR]: before verifying, kill every process in the sandbox except the
container's init (PID 1), its keep-alive (PID 1's oldest child, with its children) and this
program's own ancestors (the executor running it). A process the agent hid from our tag
(``env -u``, ``setsid``) is a process all the same. Then remove symlinks under WORKDIR that
lead into /agentenv, where the hidden tests are about to be copied. Prints what it did."""

import os
import signal
import sys


def parent(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def pids():
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def protected():
    keep = {1}
    pid = os.getpid()
    while pid and pid > 1:
        keep.add(pid)
        pid = parent(pid)
    children_of_init = sorted(p for p in pids() if parent(p) == 1)
    if children_of_init:
        keepalive = children_of_init[0]  # started with the container, before anything else
        keep.add(keepalive)
        keep.update(p for p in pids() if parent(p) == keepalive)
    return keep


def kill_all():
    killed = 0
    for _ in range(20):  # a process may fork while we look: repeat until none is left
        keep = protected()
        found = [p for p in pids() if p not in keep]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def drop_links(workdir):
    dropped = 0
    for here, dirs, files in os.walk(workdir):
        for name in dirs + files:
            path = os.path.join(here, name)
            if os.path.islink(path):
                target = os.path.realpath(path)
                if target == "/agentenv" or target.startswith("/agentenv/"):
                    os.unlink(path)
                    dropped += 1
    return dropped


if __name__ == "__main__":
    killed = kill_all()
    dropped = drop_links(sys.argv[1]) if len(sys.argv) > 1 else 0
    print("killed %d, dropped %d links" % (killed, dropped))
