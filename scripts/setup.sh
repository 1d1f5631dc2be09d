#!/usr/bin/env bash
# Prepare this machine for agentenv, doing only what is missing (quiet when all is in place):
#   1. a virtualenv in .venv with agentenv, its dev tools and Inspect AI (the provider's tests);
#   2. a Docker engine that answers: installs Debian's docker.io and starts dockerd as root
#      where needed (agentenv/sandbox/docker/engine.sh) — a machine that has Docker is left alone;
#   3. the offline base image agentenv/base:bookworm, built from Debian packages;
#   4. only when asked (AGENTENV_WITH_PODMAN=1): Debian's podman and catatonit, and the
#      base image in its storage, for the Podman backend;
#   5. only when asked (AGENTENV_WITH_BROWSER=1): Debian's chromium and chromium-driver, for
#      the tests that open `agentenv view`'s pages in a real browser.
# Same as `agentenv doctor --fix` once the package is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
stamp=.venv/.agentenv-installed
if [ ! -x .venv/bin/agentenv ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "agentenv setup: installing agentenv into .venv" >&2
  "$python" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,inspect]'
  touch "$stamp"
fi
.venv/bin/agentenv doctor --fix --quiet
if [ "${AGENTENV_WITH_PODMAN:-0}" = 1 ]; then
  .venv/bin/agentenv doctor --fix --quiet --backend podman
fi
if [ "${AGENTENV_WITH_BROWSER:-0}" = 1 ] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  echo "agentenv setup: installing Debian's chromium and chromium-driver (browser tests)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; }
fi
