"""as_agent.py COMMAND [ARGS...]: run a program of the agent's as the agent's user (the
AGENT_USER environment variable, uid:gid), with no supplementary groups and no privileges,
from a check script running as root. The agent's user cannot read /agentenv."""

import os
import sys


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: as_agent.py COMMAND [ARGS...]\n")
        return 2
    uid, _, gid = os.environ.get("AGENT_USER", "1000:1000").partition(":")
    uid_n, gid_n = int(uid), int(gid or uid)
    if os.getuid() != uid_n:
        os.setgroups([])
        os.setgid(gid_n)
        os.setuid(uid_n)
    os.environ["HOME"] = "/tmp"
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as e:
        sys.stderr.write("as_agent: cannot run %r: %s\n" % (sys.argv[1], e.strerror))
        return 1  # the agent's program is missing or not runnable: the check fails


if __name__ == "__main__":
    sys.exit(main())
