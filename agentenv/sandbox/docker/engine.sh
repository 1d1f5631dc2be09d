#!/usr/bin/env bash
# Make a Docker engine answer on this machine, changing nothing where one already does.
# Where none is installed (Debian/Ubuntu, as root): installs Debian's docker.io. Where dockerd
# is installed but not running and there is no init system: starts it in the background,
# after clearing what an engine killed with the last session left behind. Arguments name more
# Debian packages to install if their command is missing (doctor passes `debootstrap` when
# the base image must be built). Quiet when nothing had to be done.
set -euo pipefail

say() { echo "agentenv setup: $*" >&2; }
engine_up() { timeout 10 docker info >/dev/null 2>&1; }
is_root() { [ "$(id -u)" = 0 ]; }
LOG=${AGENTENV_DOCKERD_LOG:-/var/log/agentenv-dockerd.log}

need=""
# An engine that answers (maybe remote, maybe Docker Desktop) is kept as it is.
if ! engine_up && ! command -v dockerd >/dev/null 2>&1; then need="docker.io"; fi
for extra in "$@"; do
  command -v "$extra" >/dev/null 2>&1 || need="$need $extra"
done
need=${need# }
if [ -n "$need" ]; then
  if is_root && command -v apt-get >/dev/null 2>&1; then
    say "installing $need from Debian's packages"
    log=$(mktemp)
    # shellcheck disable=SC2086
    if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 \
        apt-get install -y -q $need; } >"$log" 2>&1; then
      tail -n 30 "$log" >&2; say "installing $need failed"; exit 1
    fi
    rm -f "$log"
  else
    say "missing: $need. Install it (Debian/Ubuntu: sudo apt-get install $need)."
    exit 1
  fi
fi

engine_up && exit 0

if [ -n "${DOCKER_HOST:-}" ]; then
  say "DOCKER_HOST=$DOCKER_HOST does not answer; start that engine"; exit 1
fi
if ! is_root; then
  say "the Docker engine is not running; start it (sudo systemctl start docker, or run this as root)"
  exit 1
fi

# Leftovers of an engine killed with the last session: its processes (hung, not answering),
# pid files that make a new dockerd refuse to start, and a stale socket.
for proc in dockerd containerd; do
  if pgrep -x "$proc" >/dev/null 2>&1; then
    say "stopping an unresponsive $proc"
    pkill -x "$proc" || true
  fi
done
for _ in $(seq 1 50); do pgrep -x dockerd >/dev/null 2>&1 || break; sleep 0.1; done
pkill -9 -x dockerd 2>/dev/null || true
pkill -9 -f 'containerd --config /var/run/docker/containerd' 2>/dev/null || true
rm -f /var/run/docker.pid /var/run/docker.sock /var/run/docker/containerd/containerd.pid

say "starting dockerd (log: $LOG)"
# Docker's own service file lifts the open-files limit: dockerd holds ~13 fds per sandbox
# (bench/hold.py), so a shell's default caps how many sandboxes can be held at once. Where
# the hard limit cannot be raised (no CAP_SYS_RESOURCE), say what it allows.
if ! (ulimit -n 1048576) 2>/dev/null; then
  files=$(ulimit -Hn)
  say "dockerd may open at most $files files here: about $((files / 13)) sandboxes at once"
fi
(ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec nohup dockerd >>"$LOG" 2>&1 </dev/null) &
for _ in $(seq 1 120); do
  engine_up && exit 0
  sleep 0.5
done
say "dockerd did not answer within 60 s; last lines of $LOG:"
tail -n 20 "$LOG" >&2
exit 1
