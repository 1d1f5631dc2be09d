#!/bin/bash
# Build four small repos and rename fetch_json → get_json in all of them with a codemod,
# verified by each repo's own tests. No key and no network needed.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
.venv/bin/python examples/refactor/build_repos.py "$work/repos" >/dev/null
.venv/bin/agentenv refactor --repos "$work/repos" \
  --instruction "Rename the helper http_util.fetch_json to get_json everywhere." \
  --model 'command:git grep -lz fetch_json | xargs -0 -r sed -i "s/\bfetch_json\b/get_json/g"' \
  --out "$work/job" --apply
echo
cat "$work/job/summary.md"
echo "(repos and job folder in $work)"
