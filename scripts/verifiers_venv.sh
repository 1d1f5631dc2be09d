#!/usr/bin/env bash
# A venv of its own for agentenv[verifiers]: PrimeIntellect's verifiers pins mcp<2, which
# clashes with agentenv[mcp] and [dev] (mcp>=2.3), so it cannot share the dev venv. Builds
# (or reuses) $AGENTENV_VERIFIERS_VENV, else .venv-verifiers/ at this checkout's root, with
# this checkout's agentenv installed editable WITHOUT the mcp extra, plus the verifiers pin
# of pyproject.toml's `verifiers` extra. A stamp (the pin, pyproject.toml, this script, the
# Python) makes a second run cost nothing. Prints the venv's python on stdout; pip's
# chatter goes to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${AGENTENV_VERIFIERS_VENV:-$root/.venv-verifiers}"
python="${PYTHON:-python3}"
# the one place the version is written: the extra `verifiers = ["verifiers==X"]`
pin="$(sed -n 's/^verifiers = \["\(verifiers==[^"]*\)"\]$/\1/p' "$root/pyproject.toml")"
if [ -z "$pin" ]; then
    echo "pyproject.toml has no extra 'verifiers = [\"verifiers==X\"]' to install" >&2
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
(cd / && "$venv/bin/python" -c "import agentenv.integrations.verifiers") >&2
echo "$want" >"$venv/.agentenv-stamp"
echo "$venv/bin/python"
