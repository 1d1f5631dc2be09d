#!/bin/bash
set -euo pipefail
# The alias table is upper-case, but the lookup happened before upper-casing, so "Deu",
# "ger" or "Uk" were not recognised and fell through to the zero rate.
python3 - <<'PY'
path = "ledger/regions.py"
src = open(path).read()
old = "    code = code.strip()\n    return ALIASES.get(code, code).upper()\n"
new = "    code = code.strip().upper()\n    return ALIASES.get(code, code)\n"
assert old in src
open(path, "w").write(src.replace(old, new))
PY
python3 statement.py orders.csv "ACME GmbH" 2024-03
python3 -m pytest -q tests
