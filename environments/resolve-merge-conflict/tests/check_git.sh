#!/bin/bash
# The merge of feature/chain-conversions into main is concluded: a two-parent commit on
# main, nothing unmerged, no conflict markers, and the working tree equals that commit.
set -u
MAIN=cdc35848ae47bffa33379ed65677a798d6121d4d
FEATURE=0477ee506e912490595d95ea1a224537549306ec
g() { $AS_AGENT git "$@"; }  # the agent's repo config and hooks never run as root
# and root reads nothing in the workdir itself: git (an fsmonitor hook, say) may run the
# agent's code, which could swap a file there for a link to a hidden one
fail() { echo "FAIL: $*"; exit 1; }

[ -d .git ] || fail "no .git in $(pwd)"
g rev-parse -q --verify MERGE_HEAD >/dev/null && fail "a merge is still in progress (MERGE_HEAD exists)"
[ "$(g symbolic-ref -q --short HEAD)" = main ] || fail "HEAD is not on branch main"
[ "$(g rev-parse -q --verify 'HEAD^1')" = "$MAIN" ] || fail "first parent of HEAD is not the old main"
[ "$(g rev-parse -q --verify 'HEAD^2')" = "$FEATURE" ] || fail "second parent of HEAD is not feature/chain-conversions"
g rev-parse -q --verify 'HEAD^3' >/dev/null && fail "HEAD has more than two parents"
[ -z "$(g ls-files -u)" ] || fail "unmerged paths in the index"
for f in README.md convert.py test_convert.py test_chain.py test_temperature.py; do
    g cat-file -e "HEAD:$f" 2>/dev/null || fail "$f is missing from the merge commit"
done
marker='^(<<<<<<<|>>>>>>>)( |$)|^=======$'
g grep -qE "$marker" HEAD -- . && fail "conflict markers committed"
g grep -qE "$marker" -- . && fail "conflict markers in the working tree"
g diff --quiet HEAD -- || fail "tracked files differ from the merge commit (uncommitted changes)"
for word in mi ft lb C F K; do
    $AS_AGENT grep -q "\`$word\`" README.md || fail "README.md does not list \`$word\`"
done
echo "merge ok: $(g log --oneline -1)"
