"""Kill every process the agent's commands started (tagged AGENTENV_EXEC in their
environment), except this program and its ancestors. Prints how many it killed."""

import os
import signal


def ancestors():
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def tagged():
    keep = ancestors()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in keep or name == "1":
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if b"AGENTENV_EXEC=" in f.read():
                    yield int(name)
        except OSError:
            continue


def main():
    killed = 0
    for _ in range(20):  # a process may fork while we look: repeat until none is left
        found = list(tagged())
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    print(killed)


if __name__ == "__main__":
    main()
