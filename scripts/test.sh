#!/usr/bin/env bash
# The test suite: prepares the machine (scripts/setup.sh, quiet when done) and runs pytest
# against the real Docker engine. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
