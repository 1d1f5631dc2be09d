#!/usr/bin/env bash
# A venv of its own for agentenv[verifiers] or agentenv[verifiers-v1]: PrimeIntellect's
# verifiers pins mcp<2 (0.3.1) or mcp==2.0.0 (0.4.0), which clash with agentenv[mcp] and
# [dev] (mcp>=2.3), so it cannot share the dev venv.
#   scripts/verifiers_venv.sh [EXTRA]      EXTRA: verifiers (default; 0.3.1's classic API)
#                                                 or verifiers-v1 (0.4.0's verifiers.v1)
# Builds (or reuses) .venv-EXTRA/ at this checkout's root ($AGENTENV_VERIFIERS_VENV for the
# default extra), with this checkout's agentenv installed editable WITHOUT the mcp extra,
# plus the pin of pyproject.toml's EXTRA extra. A stamp (the pin, pyproject.toml, this
# script, the Python) makes a second run cost nothing. Prints the venv's python on stdout;
# pip's chatter goes to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
extra="${1:-verifiers}"
case "$extra" in
    verifiers)
        venv="${AGENTENV_VERIFIERS_VENV:-$root/.venv-verifiers}"
        module=agentenv.integrations.verifiers ;;
    verifiers-v1)
        venv="$root/.venv-verifiers-v1"
        module=agentenv.integrations.verifiers_v1 ;;
    *)
        echo "usage: $0 [verifiers|verifiers-v1] (the extra of pyproject.toml to install)" >&2
        exit 2 ;;
esac
python="${PYTHON:-python3}"
# the one place the version is written: the extra `EXTRA = ["verifiers==X"]`
pin="$(sed -n "s/^$extra = \[\"\(verifiers==[^\"]*\)\"\]\$/\1/p" "$root/pyproject.toml")"
if [ -z "$pin" ]; then
    echo "pyproject.toml has no extra '$extra = [\"verifiers==X\"]' to install" >&2
    exit 2
fi
stamp_of() {
    { echo "$pin"; "$python" --version 2>&1; cat "$root/pyproject.toml" "$0"; } | sha256sum | cut -d' ' -f1
}
want="$(stamp_of)"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9  # two test runs at once: one builds, the other waits and reuses it
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.agentenv-stamp" 2>/dev/null)" = "$want" ]; then
    echo "$venv/bin/python"
    exit 0
fi
rm -rf "$venv"
echo "building $venv: agentenv (editable, no mcp) + $pin" >&2
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -e "$root" "$pin" >&2
# from / : in the checkout, its verifiers/ (the checker programs) would shadow the package
(cd / && "$venv/bin/python" -c "import $module") >&2
echo "$want" >"$venv/.agentenv-stamp"
echo "$venv/bin/python"
