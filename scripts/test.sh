#!/usr/bin/env bash
# The test suite: prepares the machine (scripts/setup.sh, quiet when done) and runs pytest
# against the real Docker engine. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the engine was just made ready: a test that cannot reach it is a failure, not a skip
AGENTENV_REQUIRE_DOCKER=1 exec .venv/bin/python -m pytest "$@"
