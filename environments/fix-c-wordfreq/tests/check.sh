#!/bin/bash
# Builds wordfreq with the workspace's Makefile, then compares its output on hidden inputs.
# Runs as root; the agent's make and program run through $AS_AGENT, as the agent's user,
# who cannot read the hidden cases.
set -u
cases=/agentenv/tests/cases
tmp=$(mktemp -d)
rm -f wordfreq ./*.o
if ! $AS_AGENT make >"$tmp/build.log" 2>&1; then
    echo "FAIL: make failed"; tail -20 "$tmp/build.log"; exit 1
fi
[ -x ./wordfreq ] || { echo "FAIL: make did not produce ./wordfreq"; exit 1; }
failed=0
for input in "$cases"/*.in; do
    name=$(basename "$input" .in)
    read -r -a args < "$cases/$name.args" || true
    if ! timeout 10 $AS_AGENT ./wordfreq "${args[@]}" < "$input" > "$tmp/$name.got" 2>"$tmp/$name.err"; then
        echo "FAIL $name: exit status $?"; failed=1; continue
    fi
    if cmp -s "$tmp/$name.got" "$cases/$name.out"; then
        echo "ok   $name"
    else
        echo "FAIL $name: output differs"; diff "$cases/$name.out" "$tmp/$name.got" | head -8
        failed=1
    fi
done
for bad in 0 -3 abc 5x ""; do
    timeout 10 $AS_AGENT ./wordfreq "$bad" </dev/null >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "$status" -ne 2 ] || ! grep -q "usage: wordfreq \[N\]" "$tmp/err" || [ -s "$tmp/out" ]; then
        echo "FAIL usage with N='$bad': exit $status"; failed=1
    fi
done
timeout 10 $AS_AGENT ./wordfreq 1 2 </dev/null >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL usage with two arguments"; failed=1; }
exit $failed
