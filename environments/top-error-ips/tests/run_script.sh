#!/bin/bash
# run_script.sh EXPECTED [ARGS...]: `bash top_ips.sh ARGS...` prints exactly EXPECTED's
# lines (a missing final newline is forgiven). Any other outcome is a plain failure.
expected=$1
shift
[ -f top_ips.sh ] || { echo "FAIL: top_ips.sh does not exist"; exit 1; }
# the log (an input) where the agent's script, run as the agent's user, can read it; the
# expected lines stay in /agentenv/tests, which that user cannot read
inputs=$(mktemp -d) && chmod 0755 "$inputs"
args=()
for a in "$@"; do
    if [ -f "$a" ]; then cp "$a" "$inputs/" && chmod 0644 "$inputs/$(basename "$a")"; a="$inputs/$(basename "$a")"; fi
    args+=("$a")
done
set -- "${args[@]}"
# its stderr in a folder of root's: never a name in /tmp the agent's code could take first
errors=$(mktemp -d)
got=$(cd /tmp && timeout 30 $AS_AGENT bash /workspace/top_ips.sh "$@" 2>"$errors/err")
status=$?
if [ "$status" -ne 0 ]; then
    echo "FAIL: exit status $status"; head -5 "$errors/err"; exit 1
fi
if [ "$got" != "$(cat "$expected")" ]; then
    echo "FAIL: output differs"; diff <(cat "$expected") <(printf '%s\n' "$got") | head -10; exit 1
fi
echo ok
