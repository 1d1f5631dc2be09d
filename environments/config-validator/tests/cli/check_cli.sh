#!/bin/bash
# The command line of config_check.py: output lines and exit statuses.
set -u
here=/agentenv/tests/cli
# the inputs (not the expected outputs) where the agent's program, run as the agent's user
# through $AS_AGENT, can read them
inputs=$(mktemp -d) && chmod 0755 "$inputs" && cp "$here"/*.json "$inputs"/ && chmod 0644 "$inputs"/*
out=$(mktemp) err=$(mktemp)
[ -f config_check.py ] || { echo "FAIL: config_check.py does not exist"; exit 1; }
run() { timeout 20 $AS_AGENT python3 config_check.py "$inputs/$(basename "$1")" >"$out" 2>"$err"; echo $?; }
failed=0
fail() { echo "FAIL: $*"; failed=1; }

s=$(run "$here/valid.json")
[ "$s" = 0 ] || fail "valid config: exit $s"
[ -s "$out" ] && fail "valid config: printed $(head -c 200 "$out")"

s=$(run "$here/invalid.json")
[ "$s" = 1 ] || fail "invalid config: exit $s"
[ "$(cat "$out")" = "$(cat "$here/invalid.expected")" ] || {
    fail "invalid config: output differs"; diff "$here/invalid.expected" "$out" | head -12; }

s=$(run "$here/toplevel.json")
[ "$s" = 1 ] || fail "top-level list: exit $s"
[ "$(cat "$out")" = ": type" ] || fail "top-level list: printed $(head -c 200 "$out")"

s=$(run "$here/broken.json")
[ "$s" = 2 ] || fail "broken JSON: exit $s"
[ -s "$err" ] || fail "broken JSON: nothing on stderr"

s=$(run "$here/does-not-exist.json")
[ "$s" = 2 ] || fail "missing file: exit $s"
[ -s "$err" ] || fail "missing file: nothing on stderr"

[ "$failed" = 0 ] && echo ok
exit $failed
