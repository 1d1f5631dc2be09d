#!/usr/bin/env bash
# The test suite: prepares the machine (scripts/setup.sh, quiet when done; with Podman and
# Debian's chromium too, since the suite tests that backend and the viewer in a browser) and runs pytest against the real engines. Extra
# arguments go to pytest. AGENTENV_BACKEND=podman runs the chosen tests' sandboxes on Podman.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENTENV_WITH_PODMAN=1 AGENTENV_WITH_BROWSER=1 bash scripts/setup.sh
# the engines were just made ready: a test that cannot reach one is a failure, not a skip
AGENTENV_REQUIRE_DOCKER=1 AGENTENV_REQUIRE_PODMAN=1 exec .venv/bin/python -m pytest "$@"
